"""The model holder's merge weights: each miner's median score over trusted validators."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Set

from subnet.scoring.weights import normalize


def _trusted_scores(
    reports: Mapping[str, Mapping[str, float]], trusted: Set[str], miner: str
) -> list[float]:
    """Finite scores the trusted validators gave ``miner``; a validator silent on it is skipped."""
    return [
        report[miner]
        for validator, report in reports.items()
        if validator in trusted and miner in report and math.isfinite(report[miner])
    ]


def merge_weights(
    reports: Mapping[str, Mapping[str, float]],
    trusted: Set[str],
    contributors: Mapping[str, int],
    standing: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Weight of each contributor's pseudo-gradient in this window's merge, summing to 1.

    ``reports`` maps validator hotkey -> {miner hotkey: window score}; only validators in
    ``trusted`` count. A miner's weight is the median of the trusted scores for it: one
    dishonest validator cannot move a median of three. A trusted validator that did not report a
    miner (or reported a non-finite score) is left out of that miner's median rather than counted
    as 0, since a missing report more often means the validator could not fetch the upload than a
    judgement on it. A contributor no trusted validator scored, or whose median is <= 0, gets 0.

    When no trusted validator scored any contributor (none reported this window: at bootstrap,
    or because the reports came late), each contributor is weighted by its ``standing`` instead
    (its incentive on chain: the validators' consensus over past windows), so a window whose
    reports are missing does not hand copiers and free riders an equal share; only when nobody
    has standing either (true bootstrap) is it weighted by its ``contributors`` units trained
    (samples or tokens), so training still advances. Mixing scores with either within one
    window would put them on one scale, so each fallback is all or nothing. A window that was
    scored but where every median is 0 (no upload proved its work, e.g. by chance on a small
    subnet) is weighted by standing too, or not merged at all when nobody has any: never by
    units, which would pay what the validators just judged worthless.

    Returns every contributor, normalized to sum 1, or an empty dict when all weights are 0.
    """
    medians: dict[str, float] = {}
    for miner in sorted(contributors):
        scores = _trusted_scores(reports, trusted, miner)
        if scores:
            medians[miner] = statistics.median(scores)
    scored = normalize({m: medians.get(m, 0.0) for m in sorted(contributors)})
    if scored:
        return scored
    ranked = normalize({m: float((standing or {}).get(m, 0.0)) for m in sorted(contributors)})
    if ranked or medians:
        return ranked
    return normalize({m: float(units) for m, units in sorted(contributors.items())})
