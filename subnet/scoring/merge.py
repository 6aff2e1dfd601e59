"""The model holder's merge weights: each miner's median score over trusted validators, no one
sender above ``MAX_SHARE`` honest shares of a window's merge."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Set

from subnet.scoring.weights import normalize

# No sender's weight exceeds this many honest shares (1 / contributors) of a window's merge:
# while probation holds most senders back (a network's first windows, a wave of newcomers),
# the few verified ones cannot take the whole step, and the mass they cannot take is not
# merged (the step is smaller). Honest miners with equal scores hold 1 / n each: never capped.
MAX_SHARE = 2.0


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
) -> dict[str, float]:
    """Weight of each contributor's pseudo-gradient in this window's merge, summing to 1.

    ``reports`` maps validator hotkey -> {miner hotkey: window score}; only validators in
    ``trusted`` count. A miner's weight is the median of the trusted scores for it: one
    dishonest validator cannot move a median of three. A trusted validator that did not report a
    miner (or reported a non-finite score) is left out of that miner's median rather than counted
    as 0, since a missing report more often means the validator could not fetch the upload than a
    judgement on it. A contributor no trusted validator scored, or whose median is <= 0, gets 0.

    When no trusted validator scored any contributor (none reported this window, e.g. at
    bootstrap), each contributor is weighted by its ``contributors`` units trained (samples or
    tokens) instead, so training still advances. Mixing the two within one window would put
    scores and units on one scale, so the fallback is all or nothing.

    A scored weight is then capped at ``MAX_SHARE / len(contributors)`` (``cap_shares``), so
    the weights sum to at most 1: the rest is the share of the step nobody may take this
    window.

    Returns every contributor, or an empty dict when all weights are 0.
    """
    medians: dict[str, float] = {}
    for miner in sorted(contributors):
        scores = _trusted_scores(reports, trusted, miner)
        if scores:
            medians[miner] = statistics.median(scores)
    if not medians:
        return normalize({m: float(units) for m, units in sorted(contributors.items())})
    return cap_shares(normalize({m: medians.get(m, 0.0) for m in sorted(contributors)}))


def cap_shares(weights: Mapping[str, float], multiple: float = MAX_SHARE) -> dict[str, float]:
    """``weights`` (summing to 1) with each capped at ``multiple / len(weights)``, not
    renormalized: what a capped sender cannot take is merged by nobody."""
    if not weights:
        return {}
    cap = multiple / len(weights)
    return {hk: min(w, cap) for hk, w in weights.items()}
