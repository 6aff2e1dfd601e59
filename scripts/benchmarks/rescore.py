"""What-if scoring: replay the validators of a finished run under other scoring settings.

Every validator logs, per window, what it measured of each upload (``measured``: the gains on
own, random and held-out samples, the own-data excess and its standard error, the fraction
trained, the clip to the median norm) and every verdict. The score is a pure function of those
(``subnet.scoring.window``), so a run can be scored again, window after window with the track
records and moving scores rebuilt, under any ``scoring.*`` setting, without training or
evaluating anything. With no ``--set`` the replay must reproduce the logged scores; the record
says how many it did.

    python scripts/bench.py rescore --root RUN/attacked --set proof_z=1.5 --set record_full=0.97

``RUN`` is the ``--root`` of ``bench.py adversarial``: its ``attacked`` folder holds the run's
``protocol.toml``, the validators' ``state/validator-*/metrics.jsonl`` and ``groups.json``
(hotkeys per honest group and attacker kind). Printed per validator and as a mean: each group's
share of the moving scores after the last window, replayed and as logged.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import ValidationError

from subnet.config import ProtocolConfig, load_toml
from subnet.scoring.config import ScoringConfig
from subnet.scoring.evidence import Specificity
from subnet.scoring.record import extend_records
from subnet.scoring.weights import normalize, update_moving
from subnet.scoring.window import Evaluation, gain_ratios, score_window

# Logged scores are rounded to 7 digits; a replay that differs by more did not reproduce them.
_TOLERANCE = 1e-6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py rescore``."""
    parser.add_argument("--root", type=Path, required=True,
                        help="a run folder: protocol.toml, groups.json, state/validator-*/")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a scoring setting to replay with, e.g. proof_z=1.5 (repeatable)")  # fmt: skip


def overridden(base: ScoringConfig, pairs: Iterable[str]) -> ScoringConfig:
    """``base`` with ``KEY=VALUE`` settings applied and validated like a config file's.

    Raises ``SystemExit`` with one ``error:`` line for an unknown key, a missing ``=`` or a
    value the setting refuses.
    """
    update: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().removeprefix("scoring.")
        if not sep or key not in ScoringConfig.model_fields:
            known = ", ".join(ScoringConfig.model_fields)
            raise SystemExit(f"error: --set {pair!r} must be KEY=VALUE with KEY one of {known}")
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


def replay(windows: Iterable[Mapping], cfg: ScoringConfig) -> tuple[dict[str, float], int, int]:
    """Score the logged ``scores`` records again, in order, as the validator did: records
    extended with the window's gain ratios, then the verdicts, then the moving scores. A sender
    rejected as ``equivocated`` loses its moving score and record, as at its ban.

    Returns ``(moving scores after the last window, logged scored verdicts reproduced, of)``.
    """
    records: dict[str, list[float]] = {}
    moving: dict[str, float] = {}
    same = total = 0
    for w in windows:
        verdicts = w["verdicts"]
        registered = set(verdicts)
        for hk, (why, _) in verdicts.items():  # banned in the sync before this window's scoring
            if why == "rejected" and w.get("details", {}).get(hk) == "equivocated":
                moving.pop(hk, None)
                records.pop(hk, None)
        by = {reason: {hk: w.get("details", {}).get(hk, "")
                       for hk, (why, _) in verdicts.items() if why == reason}
              for reason in ("missing", "late", "stale", "rejected", "copied")}  # fmt: skip
        evaluations = [ev for hk, m in w["measured"].items() if (ev := evaluation(hk, m))]
        records = extend_records(records, gain_ratios(evaluations, cfg, by["copied"]),
                                 cfg.record_windows, registered)  # fmt: skip
        scored = score_window(evaluations, by["missing"], by["late"], by["stale"], by["rejected"],
                              by["copied"], cfg, records)  # fmt: skip
        scores = {hk: v.score for hk, v in scored.items()}
        for hk, (why, logged) in verdicts.items():
            if why == "scored" and hk in scores:
                total += 1
                same += math.isclose(scores[hk], logged, rel_tol=1e-3, abs_tol=_TOLERANCE)
        moving = update_moving(moving, scores, registered, cfg)
    return moving, same, total


def group_shares(moving: Mapping[str, float], groups: Mapping[str, list[str]]) -> dict[str, float]:
    """Each group's share of the normalized moving scores."""
    shares = normalize(moving)
    return {g: round(sum(shares.get(hk, 0.0) for hk in hks), 4) for g, hks in groups.items()}


def _scores_records(path: Path) -> list[dict]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [r for r in rows if r.get("event") == "scores"]


def run(args: argparse.Namespace) -> dict:
    """Replay every validator of ``args.root``; the shares per group, replayed and logged."""
    root = args.root
    if (root / "attacked").is_dir() and not (root / "groups.json").exists():
        root = root / "attacked"
    missing = [n for n in ("protocol.toml", "groups.json") if not (root / n).exists()]
    paths = sorted((root / "state").glob("validator-*/metrics.jsonl"))
    if missing or not paths:
        raise SystemExit(f"error: {root} is not a finished run of bench.py adversarial "
                         f"(missing {', '.join(missing) or 'state/validator-*/metrics.jsonl'})")  # fmt: skip
    base = ProtocolConfig(**load_toml(root / "protocol.toml").get("protocol", {})).scoring
    cfg = overridden(base, args.set)
    groups = json.loads((root / "groups.json").read_text())
    validators = []
    for path in paths:
        windows = _scores_records(path)
        moving, same, total = replay(windows, cfg)
        logged = windows[-1]["moving"] if windows else {}
        validators.append({"validator": path.parent.name, "windows": len(windows),
                           "reproduced": f"{same}/{total}",
                           "shares": group_shares(moving, groups),
                           "logged_shares": group_shares(logged, groups)})  # fmt: skip
    mean = {g: round(statistics.fmean(v["shares"][g] for v in validators), 4) for g in groups}
    changed = {k: v for k, v in cfg.model_dump().items() if base.model_dump()[k] != v}
    return {"benchmark": "rescore", "root": str(root), "settings": changed,
            "validators": validators, "mean_shares": mean}  # fmt: skip
