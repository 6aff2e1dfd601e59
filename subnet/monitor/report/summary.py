"""The run page's figures, computed from a loaded :class:`~.load.Run` (pure functions, no I/O).

Definitions (DESIGN.md §8):

- a *round* is one merged model version (version >= 1); its *nodes* are the contributors merged;
- *compute time* and *sync time* of a round are the means of the miners' ``seconds`` and
  ``sync_seconds`` for that round's window; its *DDP worker* bytes are what one DDP worker
  would send plus receive for the same steps (a ring all-reduce of fp32 gradients every inner
  step over the round's contributors), the one bandwidth figure the page and the demo compare
  with (``traffic``: a miner's up + down a round); the headline's *saved ratio* (``ddp_bytes /
  bytes``, gradient uploads only) is only shown for a run whose metrics carry no meter counts;
- a participant's *tokens/s* is its summed tokens over its summed compute seconds, and its *share*
  is its summed merge weight over all rounds divided by the number of rounds;
- a participant's status is judged against the newest window any neuron logged (the run's
  "now"), over that window and the two before it: *active* if it did its job there (miner: an
  upload merged, validator: scored, holder: merged); a miner that trained but was not merged is
  *not merged* (late, missing or rejected), a holder that found nothing to merge is *stalled*;
  anyone else *idle*;
- *tokens merged* (headline and roster) count the merged contributors' tokens: those the merge
  reported, or, for a merge of whole models that reports none (gossip's final merge), every token
  its contributors trained since the version before it; *tokens trained* count every window a
  miner trained, merged or not; *rounds trained* count the windows some miner trained in;
- a round's *nodes*, *bytes* and *DDP bytes* are over the same uploads: the contributors merged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .load import Run, Train, Version

ROLE_ORDER = {"holder": 0, "validator": 1, "miner": 2}
RECENT_WINDOWS = 3  # the newest window and the two before it decide a participant's status


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
    tokens_trained: int  # tokens every miner trained, merged or not (from the miners' metrics)
    bytes: int  # bytes of all uploads fetched, all rounds
    ddp_bytes: int  # what DDP would have sent for the same steps
    saved: float | None  # ddp_bytes / bytes
    failed_windows: int  # distinct windows some neuron gave up on
    rounds_trained: int = 0  # windows some miner trained in (gossip: all, merged once at the end)
    latest_window: int | None = None  # the newest window any neuron logged
    last_round_window: int | None = None  # the window of the newest merged round
    empty_windows: list[int] = field(default_factory=list)  # the holder merged nothing
    late_uploads: int = 0  # miners' uploads that landed after the deadline

    @property
    def windows_without_round(self) -> int:
        """Windows since the newest round (since the first window seen, if none merged)."""
        if self.latest_window is None:
            return 0
        last = self.last_round_window if self.last_round_window is not None else -1
        return self.latest_window - last


@dataclass(frozen=True)
class RosterRow:
    """One participant's line in the roster; miner-only figures are ``None`` for other roles."""

    hotkey: str
    name: str
    role: str
    status: str  # "active", "not merged", "stalled" or "idle"
    rounds: int  # rounds merged (miner), scored (validator) or published (holder)
    tokens: int | None  # tokens trained (miners), merged or not
    tokens_per_s: float | None
    share: float | None
    tokens_merged: int | None = None
    verdicts: dict[str, int] = field(default_factory=dict)  # validators' verdicts, counted
    last_verdict: str | None = None
    loss: float | None = None  # the miner's latest training loss
    weight: float | None = None  # mean of the validators' latest weights on chain
    incentive: float | None = None  # from chain.json, when the run wrote one
    traffic: tuple[int, int] | None = None  # bytes up, down (when the metrics carry them)


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
    bytes: int | None  # gradient uploads merged, all senders
    ddp_bytes: int | None
    ddp_worker: int | None  # one DDP worker's bytes up + down for the same steps
    loss: float | None


def merged(run: Run) -> list[Version]:
    """The rounds: every version after the initial model, in order."""
    return [v for v in run.versions if v.version >= 1]


def loss_curve(run: Run) -> list[tuple[int, float]]:
    """``(round, held-out loss)``, one point per round that has a loss."""
    return [(v.version, v.heldout_loss) for v in merged(run) if v.heldout_loss is not None]


def train_loss_curve(run: Run) -> list[tuple[int, float]]:
    """``(window, the trainers' mean loss)``, one point per window any trainer logged a loss:
    the curve for runs whose held-out loss is measured only at the end (gossip)."""
    by_window: dict[int, list[float]] = {}
    for t in run.trains:
        if t.loss is not None:
            by_window.setdefault(t.window, []).append(t.loss)
    return [(w, sum(v) / len(v)) for w, v in sorted(by_window.items())]


def initial_loss(run: Run) -> float | None:
    """Held-out loss of version 0, if the holder logged it."""
    return next((v.heldout_loss for v in run.versions if v.version == 0), None)


def taken_in(run: Run, version: Version) -> set[int]:
    """The windows of training a merged version took in: its own window when its merge counted
    the tokens merged, else every window since the version before it (a merge of whole models,
    which carry all their rounds: gossip's final merge)."""
    if version.tokens:
        return {version.window}
    since = max((v.window for v in run.versions if v.window < version.window), default=-1)
    return set(range(since + 1, version.window + 1))


def merged_tokens(run: Run, version: Version) -> int:
    """Tokens a merged version took in: its merge's count, else its contributors' trained."""
    if version.tokens:
        return version.tokens
    windows = taken_in(run, version)
    return sum(
        t.tokens or 0
        for t in run.trains
        if t.hotkey in version.contributors and t.window in windows
    )


def headline(run: Run) -> Headline:
    """The headline figures of the whole run."""
    rounds = merged(run)
    every = rounds  # tokens: every model line's merges (two-models' both holders)
    if len(run.lines) > 1:
        every = [v for line in run.lines.values() for v in line if v.version >= 1]
    tokens = sum(merged_tokens(run, v) for v in every)
    outcomes = {w.window: w for w in run.windows}  # the holder's last word on each window
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
        rounds_trained=len({t.window for t in run.trains}),
        tokens_trained=sum(t.tokens or 0 for t in run.trains),
        latest_window=run.latest_window(),
        last_round_window=rounds[-1].window if rounds else None,
        empty_windows=sorted(w for w, o in outcomes.items() if o.empty),
        late_uploads=sum(1 for u in run.uploads if u.late),
    )


def _throughput(run: Run, tokens: int) -> float | None:
    """Merged tokens over wall-clock seconds from the initial model (or run start) to the last round."""
    rounds = merged(run)
    start = next((v.t for v in run.versions if v.version == 0), run.started)
    if not rounds or start is None or rounds[-1].t <= start:
        return None
    return tokens / (rounds[-1].t - start)


def _active_since(run: Run) -> int | None:
    """The first window that counts as recent (see the module docstring)."""
    latest = run.latest_window()
    return None if latest is None else latest - RECENT_WINDOWS + 1


def roster(run: Run) -> list[RosterRow]:
    """Every participant, holder first, then validators, then miners; by name within a role."""
    rounds = merged(run)
    round_windows = {v.window for v in rounds}
    since = _active_since(run)

    def recent(windows: set[int]) -> bool:
        return since is not None and any(w >= since for w in windows)

    weights = _latest_weights(run)
    rows = []
    for p in run.participants.values():
        extra: dict = {}
        if p.role == "miner":
            mine = [t for t in run.trains if t.hotkey == p.hotkey]
            merged_in = {w for v in rounds if p.hotkey in v.contributors for w in taken_in(run, v)}
            done = sum(1 for v in rounds if p.hotkey in v.contributors)
            tokens, per_s = _miner_throughput(mine)
            weight = sum(v.contributors.get(p.hotkey, 0.0) for v in rounds)
            share = weight / len(rounds) if rounds else None
            trained = {t.window for t in mine}
            status = (
                "active" if recent(merged_in) else ("not merged" if recent(trained) else "idle")
            )
            verdicts = _verdicts(run, p.hotkey)
            extra = {
                "tokens_merged": sum(t.tokens or 0 for t in mine if t.window in merged_in),
                "verdicts": dict(verdicts[0]),
                "last_verdict": verdicts[1],
                "loss": next((t.loss for t in reversed(mine) if t.loss is not None), None),
                "weight": weights.get(p.hotkey),
            }
        else:
            if p.role == "validator":
                windows = {s.window for s in run.scores if s.hotkey == p.hotkey}
                status = "active" if recent(windows) else "idle"
            else:
                windows = {v.window for v in rounds}
                empty = {w.window for w in run.windows if w.empty}
                status = "active" if recent(windows) else ("stalled" if recent(empty) else "idle")
            done = len(windows & round_windows)
            tokens, per_s, share = None, None, None
        traffic = run.traffic.get(p.hotkey)
        extra["traffic"] = tuple(traffic) if traffic else None
        extra["incentive"] = run.chain.get(p.hotkey, {}).get("incentive")
        rows.append(
            RosterRow(p.hotkey, p.name, p.role, status, done, tokens, per_s, share, **extra)
        )
    return sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 3), r.name, r.hotkey))


def _verdicts(run: Run, hotkey: str) -> tuple[Counter, str | None]:
    """How often validators gave ``hotkey`` each verdict, and the newest one (with its detail)."""
    counts: Counter = Counter()
    last = None
    for s in run.scores:
        if hotkey in s.verdicts:
            reason = s.verdicts[hotkey][0]
            counts[reason] += 1
            detail = s.details.get(hotkey)
            last = f"{reason} ({detail})" if detail else reason
    return counts, last


def _latest_weights(run: Run) -> dict[str, float]:
    """Each miner's weight, averaged over the validators' latest successful weight setting."""
    # Chain weights are keyed by uid: chain.json (the demo writes it) names their hotkeys.
    by_uid = {str(int(c["uid"])): hk for hk, c in run.chain.items() if "uid" in c}
    latest: dict[str, dict[str, float]] = {}
    for w in run.weights:
        if not w.ok:
            continue
        named = w.by_hotkey or {by_uid.get(k, k): v for k, v in w.weights.items()}
        latest[w.hotkey] = {k: v for k, v in named.items() if k in run.participants}
    if not latest:
        return {}
    miners = {hk for weights in latest.values() for hk in weights}
    return {hk: sum(w.get(hk, 0.0) for w in latest.values()) / len(latest) for hk in miners}


def _miner_throughput(trains: list[Train]) -> tuple[int, float | None]:
    """Summed tokens, and tokens per compute second over the windows that logged both."""
    tokens = sum(t.tokens or 0 for t in trains)
    timed = [t for t in trains if t.tokens is not None and t.seconds]
    seconds = sum(t.seconds or 0.0 for t in timed)
    return tokens, (sum(t.tokens or 0 for t in timed) / seconds if seconds else None)


def _per_worker(ddp_bytes: int | None, contributors: dict) -> int | None:
    return ddp_bytes // len(contributors) if ddp_bytes is not None and contributors else None


def round_rows(run: Run, last: int | None = None) -> list[RoundRow]:
    """The rounds table, newest first; ``last`` keeps only the most recent ones."""
    rows = []
    for v in merged(run):
        trains = [t for t in run.trains if t.window == v.window]
        starts = [t.t - (t.seconds or 0.0) - (t.sync_seconds or 0.0) for t in trains]
        # One worker's ring each way (older runs logged only the total over the workers).
        ring = v.ddp_ring if v.ddp_ring is not None else _per_worker(v.ddp_bytes, v.contributors)
        rows.append(
            RoundRow(
                round=v.version,
                window=v.window,
                started=min(starts) if starts else None,
                finished=v.t,
                nodes=len(v.contributors),
                compute_s=_mean([t.seconds for t in trains]),
                sync_s=_mean([t.sync_seconds for t in trains]),
                bytes=v.bytes,
                ddp_bytes=v.ddp_bytes,
                ddp_worker=2 * ring if ring is not None else None,
                loss=v.heldout_loss,
            )
        )
    rows.reverse()
    return rows if last is None else rows[:last]


def _mean(values: list[float | None]) -> float | None:
    present = [x for x in values if x is not None]
    return sum(present) / len(present) if present else None


@dataclass(frozen=True)
class LineRow:
    """One model line of a run that trains several (two-models' holders, sweep's points)."""

    lane: str
    holders: tuple[str, ...]  # the hotkeys that published it
    windows: tuple[int, ...]  # the rounds (windows) it merged in
    initial_loss: float | None  # held-out loss of its version 0
    final_loss: float | None  # ... of its newest version
    tokens: int  # tokens its merges took in


def line_rows(run: Run) -> list[LineRow]:
    """Each model line's merges, the main line first; empty for a run of one line."""
    if len(run.lines) < 2:
        return []
    rows = []
    for lane, versions in run.lines.items():
        merges = [v for v in versions if v.version >= 1]
        losses = [v.heldout_loss for v in versions if v.heldout_loss is not None]
        rows.append(
            LineRow(
                lane,
                tuple(sorted({v.hotkey for v in versions if v.hotkey})),
                tuple(sorted({v.window for v in merges})),
                next((v.heldout_loss for v in versions if v.version == 0), None),
                losses[-1] if losses else None,
                sum(v.tokens or 0 for v in merges),
            )
        )
    return rows


def trainers_merged(run: Run) -> tuple[int, int] | None:
    """``(merged, trainers)``: the trainers any line merged in the newest round some line
    merged, of all trainers; None before a merge. A room's answer to "is my work counted"."""
    trainers = {hk for hk, p in run.participants.items() if p.role == "miner"}
    merges = [v for line in run.lines.values() for v in line if v.version >= 1]
    if not trainers or not merges:
        return None
    newest = max(v.window for v in merges)
    merged_in = {hk for v in merges if v.window == newest for hk in v.contributors}
    return len(merged_in & trainers), len(trainers)
