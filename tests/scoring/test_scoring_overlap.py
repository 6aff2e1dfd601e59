"""Sampled-then-exact pairwise overlaps: the same verdicts as brute force, on large index sets."""

import itertools

import numpy as np
import pytest

from subnet.scoring import ScoringConfig, Upload, detect_copies
from subnet.scoring.overlap import (
    BINS,
    MIN_SAMPLE,
    SKETCH,
    as_sorted_array,
    estimate_overlap,
    fingerprint,
    fingerprint_overlaps,
    intersection_size,
    pair_overlaps,
)

UNIVERSE = 2_000_000


def _sets(seed: int, n: int, size: int) -> list[np.ndarray]:
    """Random supports plus planted copies: 1 = 0 with 5 % replaced, 3 = 2 with exactly 10 %."""
    rng = np.random.default_rng(seed)
    base = [np.unique(rng.choice(UNIVERSE, size, replace=False)) for _ in range(n)]
    for src, dst, frac in ((0, 1, 0.05), (2, 3, 0.10)):
        keep = rng.permutation(base[src])[: size - int(frac * size)]
        fresh = np.setdiff1d(rng.choice(UNIVERSE, 2 * size, replace=False), base[src])
        base[dst] = np.sort(np.concatenate([keep, fresh[: int(frac * size)]]))
    return base


def _brute(arrays: list[np.ndarray]) -> dict[tuple[int, int], float]:
    sets = [set(a.tolist()) for a in arrays]
    return {
        (i, j): len(a & b) / min(len(a), len(b))
        for (i, a), (j, b) in itertools.combinations(enumerate(sets), 2)
    }


@pytest.mark.parametrize("seed", range(2))
def test_every_pair_at_or_above_the_threshold_is_found_exactly(seed: int) -> None:
    arrays = _sets(seed, 8, 20 * MIN_SAMPLE)  # samples of ~5k: the screened path
    truth = _brute(arrays)
    got = pair_overlaps(arrays, 0.9, salt=seed)
    for pair, overlap in truth.items():
        if overlap >= 0.8:
            assert got[pair] == overlap
        if pair in got:
            assert got[pair] == overlap  # whatever is reported is exact
    assert truth[(2, 3)] == 0.9 and got[(2, 3)] == 0.9
    assert len(got) < len(truth)  # honest pairs were screened out


def test_small_sets_are_always_intersected_exactly() -> None:
    arrays = _sets(5, 5, 300)
    assert pair_overlaps(arrays, 0.9, salt=1) == _brute(arrays)


def test_detect_copies_on_arrays_matches_sets() -> None:
    arrays = _sets(7, 6, 20 * MIN_SAMPLE)
    as_arrays = [Upload(str(i), (i,), a) for i, a in enumerate(arrays)]
    as_sets = [Upload(str(i), (i,), frozenset(a.tolist())) for i, a in enumerate(arrays)]
    cfg = ScoringConfig(copy_overlap=0.9)
    assert detect_copies(as_arrays, cfg) == detect_copies(as_sets, cfg) == {"1": "0", "3": "2"}


def test_helpers() -> None:
    assert as_sorted_array(np.array([5, 1, 5, 3])).tolist() == [1, 3, 5]
    assert as_sorted_array({4, 2}).tolist() == [2, 4]
    assert intersection_size(np.array([1, 2, 9]), np.array([2, 9, 10, 11])) == 2
    assert intersection_size(np.array([], dtype=np.int64), np.array([1])) == 0


# Fingerprints: what a validator keeps across windows, bounded whatever the upload's size.


def test_a_fingerprint_is_bounded_and_exact_for_small_sets() -> None:
    big, small, other = _sets(7, 4, 20 * SKETCH)[0], *_sets(8, 4, 300)[:2]
    fb, fs = fingerprint(big, 1), fingerprint(small, 1)
    assert fb.size == big.size and fb.bottom.size == SKETCH and not fb.exact
    assert fb.nbytes == 8 * (SKETCH + BINS)  # 33 kB whatever the set's size
    assert fb.bottom.base is None  # its own memory, not a view keeping every hash alive
    assert fs.exact and fs.bottom.size == 300
    truth = intersection_size(small, other) / 300
    assert estimate_overlap(fs, fingerprint(other, 1)) == truth
    with pytest.raises(ValueError, match="different salts"):
        estimate_overlap(fs, fingerprint(other, 2))


@pytest.mark.parametrize("seed", range(2))
def test_fingerprint_overlaps_find_every_pair_near_the_threshold(seed: int) -> None:
    arrays = _sets(seed, 8, 20 * SKETCH)  # 82 k indices each: fingerprints are sketches
    truth = _brute(arrays)
    prints = [fingerprint(a, seed) for a in arrays]
    got = fingerprint_overlaps(prints, None, 0.9)
    assert set(got) >= {pair for pair, v in truth.items() if v >= 0.8}
    for pair, estimate in got.items():
        assert estimate == pytest.approx(truth[pair], abs=0.02)
    assert len(got) < len(truth)  # honest pairs were screened out
    # against kept fingerprints: the same pairs, seen from the other side
    cross = fingerprint_overlaps(prints[:2], prints[2:], 0.9)
    assert all(v < 0.5 for v in cross.values())
