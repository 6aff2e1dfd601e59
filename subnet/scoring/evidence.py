"""Proof of work on the assignment: how much more an update helps its sender's own samples.

An honest miner trains on the samples assigned to its hotkey, so its update lowers the loss of
those samples more than the loss of samples it never saw: it partly memorizes them. A copied,
replayed or generic update (a public checkpoint's delta, another miner's upload) helps every
sample about equally, since it never saw the copier's assignment. The excess gain on the own
samples is therefore the evidence that the sender did the work it is paid for.

The estimate is a difference of differences, with every comparison made on the same samples:

    specific = mean_i[g_u(own_i) - g_ref(own_i)] - mean_j[g_u(rand_j) - g_ref(rand_j)]

where ``g_u(x)`` is the relative loss drop of sample ``x`` under the upload and ``g_ref(x)``
under the window's reference update (the aggregate of all uploads). Subtracting the reference
sample by sample removes most of the spread between samples (some are easy for every update),
which is what makes the signal visible at a few dozen samples; subtracting the random-sample
term removes the part of the difference that is generic. Pure functions, known answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Specificity:
    """The excess own-data gain ``mean`` and its standard error ``se`` (both relative gains)."""

    mean: float
    se: float

    def proven(self, z: float) -> float:
        """The part of the excess above ``z`` standard errors: ``max(0, mean - z * se)``.

        Subtracting the margin (rather than thresholding) keeps the score continuous and makes
        a chance positive excess of a copier worth almost nothing in expectation.
        """
        if not (math.isfinite(self.mean) and math.isfinite(self.se)):
            return 0.0
        return max(0.0, self.mean - z * self.se)


def relative_gains(before: Sequence[float], after: Sequence[float]) -> list[float]:
    """Per-sample ``(before - after) / before``; raises ValueError on unequal lengths."""
    if len(before) != len(after):
        raise ValueError(f"{len(before)} losses before, {len(after)} after")
    return [(b - a) / b if b > 0 else math.nan for b, a in zip(before, after, strict=True)]


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    """Mean and unbiased variance (variance 0 for a single value)."""
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, var


def paired(upload: Sequence[float], reference: Sequence[float]) -> list[float]:
    """Sample-by-sample difference of two gain lists measured on the same samples."""
    if len(upload) != len(reference):
        raise ValueError(f"{len(upload)} gains against {len(reference)} reference gains")
    return [u - r for u, r in zip(upload, reference, strict=True)]


def specificity(
    own: Sequence[float],
    own_reference: Sequence[float],
    rand: Sequence[float],
    rand_reference: Sequence[float],
) -> Specificity:
    """The difference-of-differences estimate above, from per-sample relative gains.

    ``own``/``own_reference``: gains of the upload and of the reference on the same own samples;
    ``rand``/``rand_reference``: the same on the validator's random samples. The standard error
    treats the two sample sets as independent: ``sqrt(var_own / n + var_rand / m)``. Raises
    ValueError when a set is empty; a non-finite gain makes the estimate NaN (proven = 0).
    """
    if not own or not rand:
        raise ValueError("specificity needs at least one own and one random sample")
    d_own, d_rand = paired(own, own_reference), paired(rand, rand_reference)
    if not all(math.isfinite(x) for x in (*d_own, *d_rand)):
        return Specificity(math.nan, math.nan)
    m_own, v_own = _mean_var(d_own)
    m_rand, v_rand = _mean_var(d_rand)
    return Specificity(m_own - m_rand, math.sqrt(v_own / len(d_own) + v_rand / len(d_rand)))


def usefulness(r: float, r_reference: float | None, tolerance: float) -> float:
    """Credit factor in [0, 1] for an upload's gain ``r`` on random samples.

    Full credit at or above ``r_reference`` (the window's median gain on the same random
    samples), falling linearly to 0 at ``(1 - tolerance) * r_reference``. A poisoner that adds a
    harmful bias to an honest update keeps its own-data excess (the bias hurts every sample
    alike) but lowers ``r``, and so loses its credit; an honest update below the median by the
    honest spread keeps most of it. Without a positive reference, 1 (nothing to compare with).
    """
    if r_reference is None or r_reference <= 0.0 or not math.isfinite(r_reference):
        return 1.0
    if not math.isfinite(r):
        return 0.0
    floor = (1.0 - tolerance) * r_reference
    if tolerance <= 0.0:
        return 1.0 if r >= r_reference else 0.0
    return min(1.0, max(0.0, (r - floor) / (r_reference - floor)))
