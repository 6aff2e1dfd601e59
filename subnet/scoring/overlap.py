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

What a validator *keeps* across windows to catch replays cannot be the index sets themselves
(2.4 MB per upload of ``hypertrain-20m``, for every upload of three windows): it keeps a
:class:`Fingerprint` of each, a fixed 33 kB whatever the upload's size. A fingerprint holds the
``SKETCH`` smallest salted hashes of the set (a bottom-k MinHash sketch, Broder 1997; Cohen and
Kaplan 2007), from which the overlap of two sets is estimated with a standard deviation of about
0.004 near the copy threshold (and exactly when both sets have at most ``SKETCH`` indices), and the
smallest hash in each of ``BINS`` hash ranges (one-permutation MinHash, Li, Owen and Zhang 2012),
which screens every pair of a window against every kept one in one vectorised comparison so that
only pairs that may reach the threshold are estimated from their sketches.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence, Set
from dataclasses import dataclass

import numpy as np

MIN_SAMPLE = 4096
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
SKETCH = 4096  # bottom-k hashes a fingerprint keeps
BINS = 128  # one-permutation MinHash bins of the screen (a power of two)
_EMPTY = np.uint64(np.iinfo(np.uint64).max)  # an empty bin
# A pair is estimated from its sketches unless its screened Jaccard similarity is this far below
# what the threshold needs: 128 bins estimate J with a standard deviation below 0.045, so a pair
# that reaches the threshold is screened out with probability below 1e-8.
SCREEN_MARGIN = 0.25


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


@dataclass(frozen=True, eq=False)
class Fingerprint:
    """A bounded summary of one index set for overlap estimates (see the module docstring).

    ``bottom``: the ``SKETCH`` smallest salted hashes, sorted (all of them for a smaller set);
    ``bins``: the smallest hash in each of ``BINS`` equal hash ranges (``_EMPTY`` if none).
    Two fingerprints compare only under the same ``salt``.
    """

    size: int
    salt: int
    bottom: np.ndarray
    bins: np.ndarray

    @property
    def exact(self) -> bool:
        """Whether ``bottom`` holds every hash of the set (overlaps are then exact)."""
        return self.bottom.size == self.size

    @property
    def nbytes(self) -> int:
        """Bytes the fingerprint's arrays occupy."""
        return self.bottom.nbytes + self.bins.nbytes


def fingerprint(indices: Set[int] | np.ndarray, salt: int) -> Fingerprint:
    """The :class:`Fingerprint` of ``indices`` under ``salt``.

    Only the ``SKETCH`` smallest hashes are sorted (a partition finds them) and each bin's
    minimum is taken in one pass: a validator fingerprints every upload of a window, and a full
    sort of a ``hypertrain-20m`` upload's 312,000 hashes was most of the 4.5 ms it took."""
    hashes = _mix(as_sorted_array(indices), salt)  # distinct: the mix is a bijection
    if hashes.size > SKETCH:
        # a copy: a view would keep the whole partitioned array (2.5 MB an upload) alive
        bottom = np.sort(np.partition(hashes, SKETCH - 1)[:SKETCH])
    else:
        bottom = np.sort(hashes)
    shift = np.uint64(64 - BINS.bit_length() + 1)
    bins = np.full(BINS, _EMPTY, dtype=np.uint64)
    np.minimum.at(bins, (hashes >> shift).astype(np.intp), hashes)
    return Fingerprint(int(hashes.size), salt, bottom, bins)


def estimate_overlap(a: Fingerprint, b: Fingerprint) -> float:
    """``|A & B| / min(|A|, |B|)`` estimated from two fingerprints (exact when both are exact).

    The hashes of both sketches up to the smaller of their largest kept hashes are a uniform
    sample of ``A | B`` in which membership of each set is known; the shared fraction estimates
    the Jaccard similarity ``J``, and ``|A & B| = J (|A| + |B|) / (1 + J)``.
    """
    if a.salt != b.salt:
        raise ValueError("fingerprints made under different salts do not compare")
    smaller = min(a.size, b.size)
    if smaller == 0:
        return 0.0
    if a.exact and b.exact:
        return intersection_size(a.bottom, b.bottom) / smaller
    cut = min(int(f.bottom[-1]) for f in (a, b) if not f.exact)
    sa, sb = (f.bottom[: np.searchsorted(f.bottom, np.uint64(cut), "right")] for f in (a, b))
    both = intersection_size(sa, sb)
    union = sa.size + sb.size - both
    jaccard = both / union if union else 0.0
    return min(1.0, jaccard * (a.size + b.size) / (1 + jaccard) / smaller)


def screened_jaccard(left: Sequence[Fingerprint], right: Sequence[Fingerprint]) -> np.ndarray:
    """``[i, j]``: the share of non-empty bins in which ``left[i]`` and ``right[j]`` agree."""
    lb, rb = np.stack([f.bins for f in left]), np.stack([f.bins for f in right])
    out = np.zeros((len(left), len(right)))
    step = max(1, (1 << 20) // max(1, rb.size))  # about a million comparisons at a time
    for i in range(0, len(left), step):
        lo = lb[i : i + step, None, :]
        agree = ((lo == rb[None]) & (lo != _EMPTY)).sum(-1)
        used = ((lo != _EMPTY) | (rb[None] != _EMPTY)).sum(-1)
        out[i : i + step] = agree / np.maximum(used, 1)
    return out


def fingerprint_overlaps(
    left: Sequence[Fingerprint],
    right: Sequence[Fingerprint] | None,
    threshold: float,
    margin: float = SCREEN_MARGIN,
) -> dict[tuple[int, int], float]:
    """Estimated overlaps of the pairs ``(i, j)`` that may reach ``threshold``: ``left[i]``
    against ``right[j]``, or with ``right`` None every pair ``i < j`` of ``left``. A pair left
    out is below the threshold (see ``SCREEN_MARGIN``); pairs of exact fingerprints are
    intersected exactly without screening."""
    others = left if right is None else right
    if not left or not others:
        return {}
    screen = screened_jaccard(left, others)
    la, ra = (np.array([f.size for f in fs], dtype=np.float64) for fs in (left, others))
    smaller = np.minimum(la[:, None], ra[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        need = threshold * smaller / (la[:, None] + ra[None, :] - threshold * smaller)
    exact = np.array([f.exact for f in left])[:, None] & np.array([f.exact for f in others])[None]
    keep = (smaller > 0) & (exact | (screen >= need - margin))
    if right is None:
        keep &= np.triu(np.ones_like(keep), k=1)
    rows, cols = np.nonzero(keep)
    return {
        (int(i), int(j)): estimate_overlap(left[i], others[j])
        for i, j in zip(rows, cols, strict=True)
    }
