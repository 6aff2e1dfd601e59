"""What-if scoring: replay the validators of a finished run under other scoring settings.

Every validator logs, per window, what it measured of each upload (``measured``: the gains on
own, random and held-out samples, the own-data excess and its standard error, the fraction
trained, the clip to the median norm) and every verdict. The score is a pure function of those
(``subnet.scoring.window``), so a run can be scored again, window after window with the track
records and moving scores rebuilt, under other ``scoring`` settings, without training or
evaluating anything. With no ``--set`` the replay must reproduce the logged window scores and
moving scores; the record says how many it did.

    python scripts/bench.py rescore --root RUN/attacked --set proof_z=1.5 --set record_full=0.97

``RUN`` is the ``--root`` of ``bench.py adversarial``: its ``attacked`` folder holds the run's
``protocol.toml``, the validators' ``state/validator-*/metrics.jsonl`` and ``groups.json``
(hotkeys per honest group and attacker kind). Printed per validator and as a mean: each group's
share of the moving scores after the last window, replayed and as logged.

What a replay holds fixed: the measurements. Under other settings the merges, and so the model
every later window was measured on, would have differed too; a what-if says how the same
evidence would have been paid, not how the run would have gone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import ValidationError

from subnet.config import ConfigError, ProtocolConfig, load_toml
from subnet.scoring.config import ScoringConfig
from subnet.scoring.evidence import Specificity
from subnet.scoring.record import extend_records
from subnet.scoring.weights import normalize, update_moving
from subnet.scoring.window import Evaluation, gain_ratios, score_window

# Scores and moving scores are logged at full precision, the measurements rounded to 7 decimal
# places (a score is the excess less 2 standard errors, times factors of at most 1: off by at
# most about 1.5e-7); a replay that differs by more than this did not reproduce them.
_REL, _ABS = 1e-3, 5e-7
# Decided before scoring from what is not in the log (copies, the held-out draw, which uploads
# a validator fetched): a replay cannot change them, so it refuses to pretend it did.
FIXED = (
    "copy_overlap",
    "copy_z",
    "history_windows",
    "heldout_samples",
    "checks",
    "check_share",
    "check_chunks",
    "check_tolerance",
    "check_grace",
    "pay_unverified",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py rescore``."""
    parser.add_argument("--root", type=Path, required=True,
                        help="a run folder: protocol.toml, groups.json, state/validator-*/")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a scoring setting to replay with, e.g. proof_z=1.5 (repeatable)")  # fmt: skip


def overridden(base: ScoringConfig, pairs: Iterable[str]) -> ScoringConfig:
    """``base`` with ``KEY=VALUE`` settings applied and validated like a config file's.

    Raises ``SystemExit`` with one ``error:`` line for an unknown key, a missing ``=``, a key a
    replay cannot change (``FIXED``) or a value the setting refuses.
    """
    update: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("scoring.")
        if not sep or key not in ScoringConfig.model_fields:
            known = ", ".join(k for k in ScoringConfig.model_fields if k not in FIXED)
            raise SystemExit(f"error: --set {pair!r} must be KEY=VALUE with KEY one of {known}")
        if key in FIXED:
            raise SystemExit(f"error: --set {key}: decided before scoring, from what the log does "
                             "not hold; a replay cannot change it")  # fmt: skip
        update[key] = value
    try:
        return ScoringConfig(**{**base.model_dump(), **update})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'scoring'}: {e['msg']}" for e in error.errors()
        )
        raise SystemExit(f"error: --set {problems}") from None


def evaluation(hotkey: str, measured: Mapping[str, float | None]) -> Evaluation | None:
    """The evaluation a logged ``measured`` record stands for (losses at 1 before, so the
    relative gains are exact), or None when a gain was not finite."""
    a, r, h = measured.get("assigned"), measured.get("random"), measured.get("heldout")
    if a is None or r is None:
        return None
    spec, se = measured.get("specific"), measured.get("se")
    return Evaluation(
        hotkey, 1.0, 1.0 - a, 1.0, 1.0 - r,
        Specificity(spec, se) if spec is not None and se is not None else None,
        _given(measured.get("fraction"), 1.0),
        None if h is None else 1.0, None if h is None else 1.0 - h,
        _given(measured.get("scale"), 1.0),
    )  # fmt: skip


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=_REL, abs_tol=_ABS)


def replay(events: Iterable[Mapping], cfg: ScoringConfig) -> tuple[dict[str, float], dict]:
    """Score a validator's logged ``scores`` records again, in order, as it did: records
    extended with the window's gain ratios, then the verdicts, then the moving scores; at each
    logged ``equivocation`` (a ban, in its sync before a window's scoring) and failed ``check``
    (a ban, before the window's scores) the sender's moving score and record are dropped. A window scored twice (a crash before the state was saved)
    counts once, as last logged.

    Returns the moving scores after the last window and what was reproduced: ``scores`` and
    ``moving`` as ``[same, compared]`` (the logged window scores of evaluated uploads, and every
    logged moving score).
    """
    events = list(events)
    last = {e["window"]: i for i, e in enumerate(events) if e.get("event") == "scores"}
    records: dict[str, list[float]] = {}
    moving: dict[str, float] = {}
    counts: dict[str, int] = {}  # windows evaluated and paid (``ScoreBook.evaluated``)
    checked = {"scores": [0, 0], "moving": [0, 0]}
    for i, e in enumerate(events):
        if e.get("event") == "equivocation" or (e.get("event") == "check" and e["ok"] is False):
            moving.pop(e["hotkey"], None)
            records.pop(e["hotkey"], None)
            counts.pop(e["hotkey"], None)
            continue
        if e.get("event") != "scores" or last[e["window"]] != i:
            continue
        verdicts, details = e["verdicts"], e.get("details", {})
        registered = set(e["moving"])  # the validator's miners this window
        by = {reason: {hk: details.get(hk, "") for hk, (why, _) in verdicts.items() if why == reason}
              for reason in ("missing", "late", "stale", "rejected", "copied")}  # fmt: skip
        evaluations = [ev for hk, m in e["measured"].items() if (ev := evaluation(hk, m))]
        records = extend_records(records, gain_ratios(evaluations, cfg, by["copied"]),
                                 cfg.record_windows, registered)  # fmt: skip
        scored = score_window(evaluations, by["missing"], by["late"], by["stale"], by["rejected"],
                              by["copied"], cfg, records, e.get("alone"))  # fmt: skip
        scores = {hk: v.score for hk, v in scored.items()}
        # probation, after scoring, as the validator applied it (``PayRules.unpaid``)
        scores |= {hk: 0.0 for hk, (why, _) in verdicts.items() if why == "unverified"}
        kept = set(e.get("kept", ()))  # not evaluated: their moving scores stay
        paid = {hk for hk, (why, _) in verdicts.items() if why == "scored"}
        counts = {hk: counts.get(hk, 0) + (hk in paid) for hk in registered}
        moving = update_moving(
            moving, {hk: s for hk, s in scores.items() if hk not in kept}, registered, cfg,
            kept, counts,
        )  # fmt: skip
        for hk, (why, logged) in verdicts.items():
            if why == "scored" and hk in scores:
                _tally(checked["scores"], _close(scores[hk], logged))
        for hk, logged in e["moving"].items():
            _tally(checked["moving"], _close(moving.get(hk, 0.0), logged))
    return moving, checked


def _tally(pair: list[int], same: bool) -> None:
    pair[0] += same
    pair[1] += 1


def group_shares(moving: Mapping[str, float], groups: Mapping[str, list[str]]) -> dict[str, float]:
    """Each group's share of the normalized moving scores."""
    shares = normalize(moving)
    return {g: round(sum(shares.get(hk, 0.0) for hk in hks), 4) for g, hks in groups.items()}


def _events(path: Path) -> list[dict]:
    """The ``scores``, ``equivocation`` and ``check`` records of a validator's metrics, in order.

    Stricter than ``subnet.monitor.report.load.read_jsonl``, which skips a half-written line
    (right for a file a live neuron appends to): a line skipped here would make the replay
    differ from the run without saying so, so it is an ``error:`` instead.
    """
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(f"error: {path}:{n} is not a JSON line (a truncated write?)") from None
        if not isinstance(row, dict):
            raise SystemExit(f"error: {path}:{n} is not a JSON object")
        wanted = {"scores": ("window", "verdicts", "measured", "moving"),
                  "equivocation": ("hotkey",),
                  "check": ("hotkey", "ok")}.get(row.get("event"))  # fmt: skip
        if wanted is None:
            continue
        if missing := [k for k in wanted if k not in row]:
            raise SystemExit(f"error: {path}:{n}: a {row['event']} record without "
                             f"{', '.join(missing)} (a log of older code?)")  # fmt: skip
        out.append(row)
    return out


def _load(root: Path) -> tuple[ProtocolConfig, dict[str, list[str]], list[Path]]:
    """The run's protocol, its groups and its validators' metrics; one ``error:`` line if any
    is missing or unreadable."""
    missing = [n for n in ("protocol.toml", "groups.json") if not (root / n).exists()]
    paths = sorted((root / "state").glob("validator-*/metrics.jsonl"))
    if missing or not paths:
        raise SystemExit(f"error: {root} is not a finished run of bench.py adversarial "
                         f"(missing {', '.join(missing) or 'state/validator-*/metrics.jsonl'})")  # fmt: skip
    try:
        protocol = ProtocolConfig(**load_toml(root / "protocol.toml").get("protocol", {}))
    except (ConfigError, ValidationError, TypeError) as error:
        first = str(error).splitlines()[0]
        raise SystemExit(f"error: {root / 'protocol.toml'}: {first}") from None
    try:
        groups = json.loads((root / "groups.json").read_text())
    except json.JSONDecodeError:
        groups = None
    if not (isinstance(groups, dict) and all(isinstance(v, list) for v in groups.values())):
        raise SystemExit(f"error: {root / 'groups.json'} must be a JSON object of hotkey lists")
    return protocol, groups, paths


def run(args: argparse.Namespace) -> dict:
    """Replay every validator of ``args.root``; the shares per group, replayed and logged."""
    root = args.root
    if (root / "attacked").is_dir() and not (root / "groups.json").exists():
        root = root / "attacked"
    protocol, groups, paths = _load(root)
    cfg = overridden(protocol.scoring, args.set)
    validators, seen = [], set()
    for path in paths:
        events = _events(path)
        windows = [e for e in events if e["event"] == "scores"]
        moving, checked = replay(events, cfg)
        seen |= {hk for e in windows for hk in e["moving"]}
        logged_hashes = {e["config_hash"] for e in events if "config_hash" in e}
        validators.append({
            "validator": path.parent.name, "windows": len({e["window"] for e in windows}),
            "reproduced": {k: f"{same}/{n}" for k, (same, n) in checked.items()},
            "settings_as_run": logged_hashes == {protocol.config_hash()},
            "shares": group_shares(moving, groups),
            "logged_shares": group_shares(windows[-1]["moving"] if windows else {}, groups),
        })  # fmt: skip
    if not seen:
        raise SystemExit(f"error: no validator of {root} logged a scored window")
    if unknown := sorted({hk for hks in groups.values() for hk in hks} - seen):
        raise SystemExit(f"error: groups.json names {len(unknown)} hotkey(s) no validator "
                         f"scored, e.g. {unknown[0]}; is it this run's?")  # fmt: skip
    mean = {g: round(statistics.fmean(v["shares"][g] for v in validators), 4) for g in groups}
    changed = {k: v for k, v in cfg.model_dump().items() if protocol.scoring.model_dump()[k] != v}
    return {"benchmark": "rescore", "root": str(root), "settings": changed,
            "validators": validators, "mean_shares": mean}  # fmt: skip
