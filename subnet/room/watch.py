"""What a person watching a local room run sees: one line per round, then a summary.

Pure functions over the records the members' processes wrote (``metrics.jsonl``): nothing here
talks to a member. A round's line says what the run's model did (its held-out loss after the
merge, or the trainers' loss where no model was merged that round), who trained and sent, who
merged whose work, and the bytes each role moved in that round, up and down, as the members'
own byte meters counted them (everything through object storage: uploads, reports, model
versions, data).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..monitor.report.units import fmt_bytes

Records = Mapping[str, Sequence[Mapping[str, Any]]]  # member name -> its records, in order


@dataclass(frozen=True)
class Round:
    """One round (window) of a run, from every member's records."""

    window: int
    train_loss: float | None  # the trainers' mean loss this round
    sent: list[str]  # members that trained and sent an update
    scored: list[str]  # members that sent scores
    merged: dict[str, list[str]]  # merging member -> whose work it merged
    bytes: dict[str, tuple[int, int]] = field(default_factory=dict)  # role -> (up, down)
    tokens: int = 0  # tokens the merges took in
    trained_tokens: int = 0  # tokens the trainers trained this round, merged or not
    losses: dict[str, float] = field(default_factory=dict)  # each publishing member's held-out
    lead: str = ""  # the run's lead: a line names whose loss it gives where others published

    @property
    def heldout(self) -> float | None:
        """The run's held-out loss after this round: the lead's model, else the first other."""
        if self.lead in self.losses:
            return self.losses[self.lead]
        return self.losses[min(self.losses)] if self.losses else None

    @property
    def named(self) -> bool:
        """Whether the line names whose loss it gives: several models, or not the lead's."""
        return len(self.losses) > 1 or bool(
            self.losses and self.lead and self.lead not in self.losses
        )

    @property
    def empty(self) -> bool:
        """Nothing happened in this round (before the run began, or after it ended)."""
        return not (self.sent or self.scored or self.merged)


def round_of(window: int, records: Records, roles: Mapping[str, str], lead: str) -> Round:
    """Round ``window`` from ``records``; ``roles``: member name -> role class."""
    names = {r["hotkey"]: name for name, rs in records.items() for r in rs[:1] if "hotkey" in r}
    mine = {name: [r for r in rs if r.get("window") == window] for name, rs in records.items()}
    sent = {n for n, rs in mine.items() if any(r["event"] in ("train", "upload") for r in rs)}
    scored = sorted(n for n, rs in mine.items() if any(r["event"] == "scores" for r in rs))
    merged: dict[str, list[str]] = {}
    losses_of: dict[str, float] = {}  # each publishing member's held-out loss
    tokens = 0
    for name, rs in mine.items():
        for r in rs:
            whose = _merged(r)
            if whose is None:
                continue
            merged[name] = sorted({names.get(hk, hk) for hk in whose} | set(merged.get(name, [])))
            sent |= {names[hk] for hk in whose if hk in names}  # what was merged was sent
            if r["event"] == "version":
                tokens += int(r.get("tokens") or 0)
                if isinstance(r.get("heldout_loss"), int | float):
                    losses_of[name] = float(r["heldout_loss"])
    trains = [r for rs in mine.values() for r in rs if r["event"] == "train"]
    losses = [r["loss"] for r in trains if isinstance(r.get("loss"), int | float)]
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for name, rs in mine.items():
        for r in rs:
            if "bytes_up" in r or "bytes_down" in r:
                moved[roles.get(name, "?")][0] += int(r.get("bytes_up") or 0)
                moved[roles.get(name, "?")][1] += int(r.get("bytes_down") or 0)
    return Round(
        window,
        sum(losses) / len(losses) if losses else None,
        sorted(sent),
        scored,
        merged,
        {k: (u, d) for k, (u, d) in moved.items()},
        tokens,
        sum(int(r.get("tokens") or 0) for r in trains),
        losses_of,
        lead,
    )


def _merged(record: Mapping[str, Any]) -> list[str] | None:
    """The hotkeys whose work ``record`` merged, or None for a record that merges nothing: a
    published version (its contributors), a ring's ``mix`` (the predecessor whose model it took
    in, when it was usable) or a tree's ``reduce`` (the children whose partials it averaged)."""
    event = record["event"]
    if event == "version" and int(record.get("version", 0)) > 0:
        return list(record.get("contributors") or {})
    if event == "mix" and float(record.get("weight") or 0) > 0:
        return [record["predecessor"]]
    if event == "reduce":  # a leaf of the tree (no children) merged nobody's work
        return list(record.get("children") or {}) or None
    return None


def round_line(r: Round) -> str:
    """One line for a round."""
    if r.named:
        loss = "held-out loss " + ", ".join(f"{v:.4f} ({k})" for k, v in sorted(r.losses.items()))
    elif r.heldout is not None:
        loss = f"held-out loss {r.heldout:.4f}"
    elif r.train_loss is not None:
        loss = f"train loss {r.train_loss:.4f}"
    else:
        loss = "no loss yet"
    parts = [f"round {r.window:>3}: {loss}", f"sent {_names(r.sent)}"]
    if r.scored:
        parts.append(f"scored by {_names(r.scored)}")
    if r.merged:
        parts += [f"{who} merged {_names(whose)}" for who, whose in sorted(r.merged.items())]
    else:
        parts.append("nothing merged")
    moved = [
        f"{role} {fmt_bytes(up)} up/{fmt_bytes(down)} down"
        for role, (up, down) in sorted(r.bytes.items())
    ]
    if moved:
        parts.append("bytes: " + ", ".join(moved))
    return "; ".join(parts)


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "nobody"


def summary(rounds: Sequence[Round], seconds: float, start: float | None = None) -> list[str]:
    """The closing lines: rounds merged, the held-out loss from the start (``start``: the model
    before round 0, when known) or the first merged round to the last, tokens and tokens/s."""
    merged = [r for r in rounds if r.merged]
    losses = [r.heldout for r in merged if r.heldout is not None]
    trained = [r.train_loss for r in rounds if r.train_loss is not None]
    # A merge of whole models (gossip's final merge) counts no tokens of its own: it took in
    # every round its contributors trained
    tokens = sum(r.tokens for r in merged) or (
        sum(r.trained_tokens for r in rounds) if merged else 0
    )
    models = sorted({n for r in merged for n in r.losses})
    if len(models) > 1:  # several model lines: each counts its own merges
        counts = [f"{n} {sum(n in r.merged for r in rounds)}" for n in models]
        lines = [f"rounds merged of {len(rounds)}: {', '.join(counts)}"]
    else:
        lines = [f"{len(merged)} of {len(rounds)} rounds merged"]
    others: list[str] = []
    prefix = ""
    if len(models) > 1:  # several models (two holders): the lead's from the start, each apart
        lead = merged[0].lead
        losses = [r.losses[lead] for r in merged if lead in r.losses]
        prefix = f"{lead}'s model: "
        for name in (n for n in models if n != lead):
            theirs = [r.losses[name] for r in merged if name in r.losses]
            others.append(f"{name}'s model: held-out loss {theirs[0]:.4f} -> {theirs[-1]:.4f}")
    if start is not None and losses:
        lines.append(
            f"{prefix}held-out loss {start:.4f} at the start -> {losses[-1]:.4f} at the end"
        )
    elif len(losses) >= 2:
        lines.append(
            f"{prefix}held-out loss {losses[0]:.4f} -> {losses[-1]:.4f} over the merged rounds"
        )
    lines += others
    if len(trained) >= 2:
        lines.append(f"trainers' loss {trained[0]:.4f} -> {trained[-1]:.4f}")
    if tokens:
        rate = tokens / seconds if seconds > 0 else 0.0
        lines.append(f"{tokens:,} tokens merged, {rate:,.0f} tokens/s over {seconds:.0f} s")
    return lines
