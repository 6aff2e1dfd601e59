"""Pairwise index overlap of many large sparse uploads, fast: a secret sample first, exact after.

Copy detection needs ``|A & B| / min(|A|, |B|)`` for every pair of uploads; with 64 uploads of
300 k indices each that is 2,016 intersections of 300 k-element sets, about 10 s as Python sets.
Almost every pair of honest uploads overlaps far below the copy threshold, so:

1. Each index set is *sampled*: an index is kept when a 64-bit mix of it and a random salt falls
   in the lowest ``1 / 2**sample_bits`` of the range (splitmix64's finalizer, so structured index
   sets sample like random ones). The salt is drawn afresh per call from the OS, so a copier
   cannot know which of its indices are looked at.
2. The samples' pairwise co-occurrence counts come from one sort of all sampled indices.
3. Only the pairs whose sampled overlap is within ``margin`` of the threshold (and every pair
   whose samples are too small to trust) get an exact intersection.

With samples of at least ``MIN_SAMPLE`` indices the sampled overlap has a standard deviation
below 0.008, so a pair that truly reaches the threshold is skipped with probability below
``exp(-2 * 4096 * margin**2)`` (Hoeffding; about 1e-35 at the default margin of 0.1). Every
overlap returned is exact.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence, Set

import numpy as np

MIN_SAMPLE = 4096
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def as_sorted_array(indices: Set[int] | np.ndarray) -> np.ndarray:
    """Indices as a sorted, duplicate-free ``int64`` array (cheap when already sorted)."""
    if isinstance(indices, np.ndarray):
        arr = indices.astype(np.int64, copy=False).reshape(-1)
        if arr.size < 2 or bool((arr[1:] > arr[:-1]).all()):
            return arr
        return np.unique(arr)
    return np.fromiter(sorted(indices), dtype=np.int64, count=len(indices))


def intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """``|a & b|`` for sorted duplicate-free arrays."""
    if a.size == 0 or b.size == 0:
        return 0
    if a.size > b.size:
        a, b = b, a
    pos = np.searchsorted(b, a)
    pos[pos == b.size] = 0
    return int((b[pos] == a).sum())


def _mix(values: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64's finalizer of ``values + salt`` (a bijection on 64-bit words)."""
    with np.errstate(over="ignore"):
        x = values.astype(np.uint64) + np.uint64(salt)
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


def _sample_counts(samples: Sequence[np.ndarray]) -> np.ndarray:
    """``counts[i, j] = |s_i & s_j|`` for all pairs, from one sort of every sampled index."""
    n = len(samples)
    keys = np.concatenate([s * n + i for i, s in enumerate(samples)])
    keys.sort()
    coords, labels = keys // n, keys % n
    counts = np.zeros(n * n, dtype=np.int64)
    # Within one coordinate the labels ascend, so comparing entries d apart finds each pair once.
    for d in range(1, n):
        same = coords[d:] == coords[:-d]
        if not same.any():
            break
        counts += np.bincount(labels[:-d][same] * n + labels[d:][same], minlength=n * n)
    counts = counts.reshape(n, n)
    return counts + counts.T


def pair_overlaps(
    arrays: Sequence[np.ndarray],
    threshold: float,
    *,
    sample_bits: int = 4,
    margin: float = 0.1,
    salt: int | None = None,
) -> dict[tuple[int, int], float]:
    """Exact ``|a_i & a_j| / min(|a_i|, |a_j|)`` for each pair ``i < j`` that may reach
    ``threshold``; a pair left out is below it (see the module docstring for the odds)."""
    n = len(arrays)
    salt = secrets.randbits(64) if salt is None else salt
    cutoff = np.uint64(1 << (64 - sample_bits))
    samples = [a[_mix(a, salt) < cutoff] for a in arrays]
    counts = _sample_counts(samples) if n > 1 else np.zeros((n, n), dtype=np.int64)
    out: dict[tuple[int, int], float] = {}
    for i in range(n):
        for j in range(i + 1, n):
            smaller = min(arrays[i].size, arrays[j].size)
            if smaller == 0:
                continue
            sampled = min(samples[i].size, samples[j].size)
            if sampled >= MIN_SAMPLE and counts[i, j] / sampled < threshold - margin:
                continue
            out[(i, j)] = intersection_size(arrays[i], arrays[j]) / smaller
    return out
