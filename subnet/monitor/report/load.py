"""Read a run folder (``run.json`` plus each neuron's ``metrics.jsonl``) into typed records.

A run in progress is the normal case: files may be missing, a line may be half written and a
field may not exist yet. Whatever is absent becomes ``None`` (or an empty mapping) rather than
an error, so the page renders what exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Participant:
    """One neuron of the run: ``role`` is ``miner``, ``validator`` or ``holder``."""

    hotkey: str
    name: str
    role: str


@dataclass(frozen=True)
class Version:
    """The holder published model ``version`` after merging ``window`` (version 0: initial)."""

    t: float
    window: int
    version: int
    heldout_loss: float | None
    contributors: dict[str, float] = field(default_factory=dict)  # miner hotkey -> merge weight
    bytes: int | None = None  # bytes of all uploads fetched that window
    tokens: int | None = None  # tokens trained by the merged contributors
    reports: int | None = None
    ddp_bytes: int | None = None  # what DDP would have sent for the same steps
    merge_seconds: float | None = None
    ddp_ring: int | None = None  # DDP ring all-reduce: bytes per worker each way, this round
    lane: str = "model"  # the model line it was published on (two-models: model_a, model_b)
    hotkey: str = ""  # the holder that published it


@dataclass(frozen=True)
class Transfer:
    """Bytes one neuron moved (its meter) over one record: a miner's or validator's window,
    the holder's version; ``up`` sent, ``down`` received, header lines included."""

    hotkey: str
    role: str
    event: str
    up: int
    down: int


@dataclass(frozen=True)
class Train:
    """A miner's inner training for one window."""

    t: float  # logged when training ended
    hotkey: str
    window: int
    steps: int | None
    tokens: int | None
    loss: float | None
    seconds: float | None  # compute time
    sync_seconds: float | None  # time to sync the base model
    bytes: int | None  # upload payload
    version: int | None  # base model version


@dataclass(frozen=True)
class Scores:
    """A validator's verdicts for one window: ``verdicts[hotkey] = (reason, score)``."""

    t: float
    hotkey: str
    window: int
    version: int | None
    verdicts: dict[str, tuple[str, float]]
    moving: dict[str, float]
    details: dict[str, str] = field(default_factory=dict)  # rejection code, copied-from ...
    # hotkey -> what its score was computed from (``Evaluation.measures``: assigned, random,
    # specific, se, fraction, scale)
    measured: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Weights:
    """A validator's attempt to set weights on chain (``weights``: uid -> weight)."""

    t: float
    hotkey: str
    block: int | None
    ok: bool
    reason: str
    weights: dict[str, float]
    by_hotkey: dict[str, float] = field(default_factory=dict)  # the same weights, by hotkey


@dataclass(frozen=True)
class Failure:
    """A window a neuron gave up on, with its reason code."""

    t: float
    hotkey: str
    role: str
    window: int | None
    reason: str


@dataclass(frozen=True)
class WindowOutcome:
    """The holder's view of one window: each sender's outcome and why nothing merged."""

    t: float
    window: int
    verdicts: dict[str, str]  # hotkey -> accepted, missing, stale, rejected:<code>
    merged: list[str]
    empty: str  # "" when something merged; else "no uploads" or "no positive score"


@dataclass(frozen=True)
class UploadTiming:
    """A miner's upload against the deadline (``late``: it landed at or after it)."""

    t: float
    hotkey: str
    window: int
    late: bool
    seconds_to_deadline: float | None


@dataclass
class Run:
    """Everything the run page reads; lists are sorted by time."""

    path: Path
    name: str
    started: float | None = None
    network: str | None = None
    netuid: int | None = None
    config_hash: str | None = None
    n_params: int | None = None
    protocol: dict[str, Any] = field(default_factory=dict)
    participants: dict[str, Participant] = field(default_factory=dict)
    versions: list[Version] = field(default_factory=list)
    trains: list[Train] = field(default_factory=list)
    scores: list[Scores] = field(default_factory=list)
    weights: list[Weights] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    windows: list[WindowOutcome] = field(default_factory=list)
    uploads: list[UploadTiming] = field(default_factory=list)
    traffic: dict[str, list[int]] = field(default_factory=dict)  # hotkey -> [bytes up, down]
    transfers: list[Transfer] = field(default_factory=list)  # one per record with bytes
    # checks of training: role -> [bytes, count] (a miner's answers written, a validator's read)
    verification: dict[str, list[int]] = field(default_factory=dict)
    chain: dict[str, dict[str, float]] = field(default_factory=dict)  # hotkey -> incentive ...
    # Every model line's versions (lane -> versions in order); ``versions`` is the main line's:
    # ``model`` where there is one, else the first by name (two-models: model_a, the run lead's).
    lines: dict[str, list[Version]] = field(default_factory=dict)

    def latest_window(self) -> int | None:
        """The newest window any neuron logged (the run's "now")."""
        windows = [r.window for r in (*self.trains, *self.scores, *self.windows, *self.uploads)]
        windows += [v.window for v in self.versions if v.version > 0]
        windows += [f.window for f in self.failures if f.window is not None]
        return max(windows) if windows else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects in ``path``, skipping blank, half-written or non-object lines."""
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # typically the last line, still being written
        if isinstance(record, dict):
            records.append(record)
    return records


def metrics_files(path: str | Path) -> list[Path]:
    """Every neuron's ``metrics.jsonl`` under a run folder.

    A local run keeps them in ``path/state/<neuron>/``; a hand-started neuron in
    ``<--neuron.state_dir>/<neuron>/`` (default ``.beam/state``), so ``path`` may also be that
    state folder itself, or the folder above it.
    """
    path = Path(path)
    return sorted(set(path.glob("state/*/metrics.jsonl")) | set(path.glob("*/metrics.jsonl")))


def load_run(path: str | Path) -> Run:
    """Read ``path/run.json`` and every neuron's ``metrics.jsonl`` (see :func:`metrics_files`)."""
    path = Path(path)
    run = _read_header(path)
    for metrics in metrics_files(path):
        for record in read_jsonl(metrics):
            _add(run, record)
    by_line: dict[str, dict[int, Version]] = {}
    for v in sorted(run.versions, key=lambda v: v.t):  # a version logged twice: the last wins
        by_line.setdefault(v.lane, {})[v.version] = v
    run.lines = {
        lane: sorted(versions.values(), key=lambda v: v.version)
        for lane, versions in sorted(by_line.items(), key=lambda kv: (kv[0] != "model", kv[0]))
    }
    run.versions = next(iter(run.lines.values()), [])
    for records in (run.trains, run.scores, run.weights, run.failures, run.windows, run.uploads):
        records.sort(key=lambda r: r.t)
    run.chain = _read_chain(path)
    return run


def _read_chain(path: Path) -> dict[str, dict[str, float]]:
    """``chain.json`` (written by the demo at the end): incentive and dividends per hotkey."""
    try:
        data = json.loads((path / "chain.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {str(k): _numbers(v) for k, v in _dict(data).items()}


def _read_header(path: Path) -> Run:
    try:
        header = json.loads((path / "run.json").read_text())
    except (OSError, json.JSONDecodeError):
        header = {}
    if not isinstance(header, dict):
        header = {}
    participants = {}
    for hotkey, info in (header.get("participants") or {}).items():
        info = info if isinstance(info, dict) else {}
        name = str(info.get("name") or hotkey[:8])
        participants[hotkey] = Participant(hotkey, name, str(info.get("role") or "?"))
    return Run(
        path=path,
        name=str(header.get("name") or path.resolve().name),
        started=_float(header.get("started")),
        network=_str(header.get("network")),
        netuid=_int(header.get("netuid")),
        config_hash=_str(header.get("config_hash")),
        n_params=_int(header.get("n_params")),
        protocol=header.get("protocol") if isinstance(header.get("protocol"), dict) else {},
        participants=participants,
    )


def _add(run: Run, r: dict[str, Any]) -> None:
    """File one metrics record under its kind; unknown events are ignored."""
    hotkey, role, t = str(r.get("hotkey", "")), str(r.get("role", "?")), _float(r.get("t")) or 0.0
    if hotkey and hotkey not in run.participants:
        run.participants[hotkey] = Participant(hotkey, hotkey[:8], role)
    event = r.get("event")
    _add_bytes(run, r, hotkey, role, event)
    if event == "version" and _int(r.get("version")) is not None:
        run.versions.append(_version(r, t, hotkey))
    elif event == "train" and _int(r.get("window")) is not None:
        run.trains.append(_train(r, t, hotkey))
    elif event == "scores" and _int(r.get("window")) is not None:
        run.scores.append(_scores(r, t, hotkey))
    elif event == "weights":
        weights = _numbers(r.get("weights"))
        run.weights.append(
            Weights(
                t,
                hotkey,
                _int(r.get("block")),
                bool(r.get("ok")),
                str(r.get("reason") or ""),
                weights,
                _numbers(r.get("by_hotkey")),
            )
        )
    elif event == "uploads" and _int(r.get("window")) is not None:
        merged = r.get("merged") if isinstance(r.get("merged"), list) else []
        run.windows.append(
            WindowOutcome(
                t,
                _int(r.get("window"), 0),
                {str(k): str(v) for k, v in _dict(r.get("verdicts")).items()},
                [str(m) for m in merged],
                str(r.get("empty") or ""),
            )
        )
    elif event == "upload" and _int(r.get("window")) is not None:
        run.uploads.append(
            UploadTiming(
                t,
                hotkey,
                _int(r.get("window"), 0),
                bool(r.get("late")),
                _float(r.get("seconds_to_deadline")),
            )
        )
    elif event == "window_failed":
        run.failures.append(
            Failure(t, hotkey, role, _int(r.get("window")), str(r.get("reason") or "?"))
        )


def _add_bytes(run: Run, r: dict[str, Any], hotkey: str, role: str, event: Any) -> None:
    """Count a record's traffic and verification bytes, whatever its event."""
    up, down = _int(r.get("bytes_up")), _int(r.get("bytes_down"))
    if hotkey and (up is not None or down is not None):  # fields a later version may add
        totals = run.traffic.setdefault(hotkey, [0, 0])
        totals[0] += up or 0
        totals[1] += down or 0
        run.transfers.append(Transfer(hotkey, role, str(event), up or 0, down or 0))
    if event in ("answered", "check") and (nbytes := _int(r.get("bytes"))):
        entry = run.verification.setdefault(role, [0, 0])
        entry[0] += nbytes
        entry[1] += 1


def _version(r: dict[str, Any], t: float, hotkey: str) -> Version:
    """A ``version`` record: one published model version."""
    contributors = _numbers(r.get("contributors"))
    return Version(
        t,
        _int(r.get("window"), -1),
        _int(r.get("version"), 0),
        _float(r.get("heldout_loss")),
        contributors,
        _int(r.get("bytes")),
        _int(r.get("tokens")),
        _int(r.get("reports")),
        _int(r.get("ddp_bytes")),
        _float(r.get("merge_seconds")),
        _int(r.get("ddp_ring_bytes_per_worker")),
        str(r.get("lane") or "model"),
        hotkey,
    )


def _train(r: dict[str, Any], t: float, hotkey: str) -> Train:
    """A ``train`` record: one miner's training in one window."""
    return Train(
        t,
        hotkey,
        _int(r.get("window"), 0),
        _int(r.get("steps")),
        _int(r.get("tokens")),
        _float(r.get("loss")),
        _float(r.get("seconds")),
        _float(r.get("sync_seconds")),
        _int(r.get("bytes")),
        _int(r.get("version")),
    )


def _scores(r: dict[str, Any], t: float, hotkey: str) -> Scores:
    """A ``scores`` record: one validator's verdicts and scores for one window."""
    verdicts = {
        str(k): (str(v[0]), float(v[1]))
        for k, v in _dict(r.get("verdicts")).items()
        if isinstance(v, list | tuple) and len(v) == 2 and _float(v[1]) is not None
    }
    moving = _numbers(r.get("moving"))
    details = {str(k): str(v) for k, v in _dict(r.get("details")).items()}
    measured = {str(k): _numbers(v) for k, v in _dict(r.get("measured")).items()}
    return Scores(
        t,
        hotkey,
        _int(r.get("window"), 0),
        _int(r.get("version")),
        verdicts,
        moving,
        details,
        measured,
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _numbers(value: Any) -> dict[str, float]:
    """A ``{key: number}`` mapping, dropping entries that are not finite numbers."""
    pairs = ((str(k), _float(v)) for k, v in _dict(value).items())
    return {k: v for k, v in pairs if v is not None}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None  # NaN and inf count as absent


def _int(value: Any, default: int | None = None) -> int | None:
    number = _float(value)
    return default if number is None else int(number)
