"""The run page's figures, computed from a loaded :class:`~.load.Run` (pure functions, no I/O).

Definitions (DESIGN.md §8):

- a *round* is one merged model version (version >= 1); its *nodes* are the contributors merged;
- *compute time* and *sync time* of a round are the means of the miners' ``seconds`` and
  ``sync_seconds`` for that round's window; *saved ratio* is ``ddp_bytes / bytes``;
- a participant's *tokens/s* is its summed tokens over its summed compute seconds, and its *share*
  is its summed merge weight over all rounds divided by the number of rounds;
- a participant is *active* if it did its job (miner: trained, validator: scored, holder: merged)
  in the last two rounds' windows or later, else *idle*.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .load import Run, Train, Version

ROLE_ORDER = {"holder": 0, "validator": 1, "miner": 2}


@dataclass(frozen=True)
class Headline:
    """The figures in the page's card row; ``None`` where the run has not produced them yet."""

    final_loss: float | None  # held-out loss of the latest version
    initial_loss: float | None  # held-out loss of version 0
    rounds: int
    nodes: int  # participants known (run.json plus anyone seen in the metrics)
    nodes_by_role: dict[str, int]
    throughput: float | None  # merged tokens per wall-clock second since the initial model
    tokens: int  # tokens trained by the merged contributors, all rounds
    bytes: int  # bytes of all uploads fetched, all rounds
    ddp_bytes: int  # what DDP would have sent for the same steps
    saved: float | None  # ddp_bytes / bytes
    failed_windows: int  # distinct windows some neuron gave up on


@dataclass(frozen=True)
class RosterRow:
    """One participant's line in the roster; miner-only figures are ``None`` for other roles."""

    hotkey: str
    name: str
    role: str
    status: str  # "active" or "idle"
    rounds: int  # rounds merged (miner), scored (validator) or published (holder)
    tokens: int | None
    tokens_per_s: float | None
    share: float | None


@dataclass(frozen=True)
class RoundRow:
    """One merged version in the rounds table."""

    round: int  # the version number
    window: int
    started: float | None  # unix time the earliest miner began syncing for this window
    finished: float  # unix time the version was published
    nodes: int
    compute_s: float | None
    sync_s: float | None
    bytes: int | None
    ddp_bytes: int | None
    saved: float | None
    loss: float | None


def merged(run: Run) -> list[Version]:
    """The rounds: every version after the initial model, in order."""
    return [v for v in run.versions if v.version >= 1]


def loss_curve(run: Run) -> list[tuple[int, float]]:
    """``(round, held-out loss)``, one point per round that has a loss."""
    return [(v.version, v.heldout_loss) for v in merged(run) if v.heldout_loss is not None]


def initial_loss(run: Run) -> float | None:
    """Held-out loss of version 0, if the holder logged it."""
    return next((v.heldout_loss for v in run.versions if v.version == 0), None)


def headline(run: Run) -> Headline:
    """The headline figures of the whole run."""
    rounds = merged(run)
    tokens = sum(v.tokens or 0 for v in rounds)
    with_bytes = [v for v in rounds if v.bytes and v.ddp_bytes is not None]
    sent = sum(v.bytes or 0 for v in with_bytes)
    ddp = sum(v.ddp_bytes or 0 for v in with_bytes)
    losses = [v.heldout_loss for v in run.versions if v.heldout_loss is not None]
    return Headline(
        final_loss=losses[-1] if losses else None,
        initial_loss=initial_loss(run),
        rounds=len(rounds),
        nodes=len(run.participants),
        nodes_by_role=dict(Counter(p.role for p in run.participants.values())),
        throughput=_throughput(run, tokens),
        tokens=tokens,
        bytes=sent,
        ddp_bytes=ddp,
        saved=ddp / sent if sent else None,
        failed_windows=len({f.window for f in run.failures}),
    )


def _throughput(run: Run, tokens: int) -> float | None:
    """Merged tokens over wall-clock seconds from the initial model (or run start) to the last round."""
    rounds = merged(run)
    start = next((v.t for v in run.versions if v.version == 0), run.started)
    if not rounds or start is None or rounds[-1].t <= start:
        return None
    return tokens / (rounds[-1].t - start)


def _active_since(run: Run) -> int | None:
    """The window from which doing one's job counts as active: the second-to-last round's."""
    windows = [v.window for v in merged(run)]
    return windows[-2] if len(windows) >= 2 else (windows[0] if windows else None)


def roster(run: Run) -> list[RosterRow]:
    """Every participant, holder first, then validators, then miners; by name within a role."""
    rounds = merged(run)
    round_windows = {v.window for v in rounds}
    since = _active_since(run)
    rows = []
    for p in run.participants.values():
        if p.role == "miner":
            mine = [t for t in run.trains if t.hotkey == p.hotkey]
            windows = {t.window for t in mine}
            done = sum(1 for v in rounds if p.hotkey in v.contributors)
            tokens, per_s = _miner_throughput(mine)
            weight = sum(v.contributors.get(p.hotkey, 0.0) for v in rounds)
            share = weight / len(rounds) if rounds else None
        else:
            if p.role == "validator":
                windows = {s.window for s in run.scores if s.hotkey == p.hotkey}
            else:
                windows = {v.window for v in rounds}
            done = len(windows & round_windows)
            tokens, per_s, share = None, None, None
        active = since is not None and any(w >= since for w in windows)
        rows.append(RosterRow(
            p.hotkey, p.name, p.role, "active" if active else "idle", done, tokens, per_s, share
        ))  # fmt: skip
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 3), r.name, r.hotkey))


def _miner_throughput(trains: list[Train]) -> tuple[int, float | None]:
    """Summed tokens, and tokens per compute second over the windows that logged both."""
    tokens = sum(t.tokens or 0 for t in trains)
    timed = [t for t in trains if t.tokens is not None and t.seconds]
    seconds = sum(t.seconds or 0.0 for t in timed)
    return tokens, (sum(t.tokens or 0 for t in timed) / seconds if seconds else None)


def round_rows(run: Run, last: int | None = None) -> list[RoundRow]:
    """The rounds table, newest first; ``last`` keeps only the most recent ones."""
    rows = []
    for v in merged(run):
        trains = [t for t in run.trains if t.window == v.window]
        starts = [t.t - (t.seconds or 0.0) - (t.sync_seconds or 0.0) for t in trains]
        saved = v.ddp_bytes / v.bytes if v.bytes and v.ddp_bytes is not None else None
        rows.append(RoundRow(
            round=v.version, window=v.window, started=min(starts) if starts else None,
            finished=v.t, nodes=len(v.contributors),
            compute_s=_mean([t.seconds for t in trains]),
            sync_s=_mean([t.sync_seconds for t in trains]),
            bytes=v.bytes, ddp_bytes=v.ddp_bytes, saved=saved, loss=v.heldout_loss,
        ))  # fmt: skip
    rows.reverse()
    return rows if last is None else rows[:last]


def _mean(values: list[float | None]) -> float | None:
    present = [x for x in values if x is not None]
    return sum(present) / len(present) if present else None
