"""Deterministic assignment, validator random draws and sample receipts."""

from __future__ import annotations

import pytest

from subnet.data import assign_samples, random_sample_ids, sample_receipt


def test_assignment_is_pure_distinct_and_in_range() -> None:
    ids = assign_samples(seed=7, window=3, hotkey="5Fminer", n_samples=200, n_total=1000)
    assert ids == assign_samples(seed=7, window=3, hotkey="5Fminer", n_samples=200, n_total=1000)
    assert len(set(ids)) == 200
    assert all(0 <= i < 1000 for i in ids)


def test_assignment_known_answer() -> None:
    # Frozen: changing this changes the protocol (every validator would disagree with old miners).
    assert assign_samples(0, 0, "hotkey", 5, 100) == [15, 79, 73, 58, 42]


def test_assignment_depends_on_every_input() -> None:
    base = assign_samples(1, 1, "a", 50, 10_000)
    assert base != assign_samples(2, 1, "a", 50, 10_000)
    assert base != assign_samples(1, 2, "a", 50, 10_000)
    assert base != assign_samples(1, 1, "b", 50, 10_000)


def test_assignment_prefix_is_stable_when_asking_for_more() -> None:
    # A miner given more samples later trains a superset in the same order.
    assert assign_samples(1, 1, "a", 100, 500)[:30] == assign_samples(1, 1, "a", 30, 500)


def test_full_assignment_is_a_permutation_and_hotkeys_overlap_only_by_chance() -> None:
    assert sorted(assign_samples(5, 5, "x", 64, 64)) == list(range(64))
    a = set(assign_samples(5, 5, "x", 100, 100_000))
    b = set(assign_samples(5, 5, "y", 100, 100_000))
    assert len(a & b) <= 2  # expected 0.1


def test_assignment_rejects_impossible_requests() -> None:
    with pytest.raises(ValueError):
        assign_samples(0, 0, "a", 11, 10)
    with pytest.raises(ValueError):
        assign_samples(0, 0, "a", -1, 10)


@pytest.mark.parametrize("n_samples", [5, 90])  # the sparse and the dense path
def test_random_ids_exclude_the_assignment(n_samples: int) -> None:
    assigned = assign_samples(0, 0, "a", 10, 100)
    drawn = random_sample_ids(n_samples, 100, exclude=assigned, seed=1)
    assert len(set(drawn)) == n_samples
    assert not set(drawn) & set(assigned)
    assert drawn == random_sample_ids(n_samples, 100, exclude=assigned, seed=1)
    with pytest.raises(ValueError, match="only 90"):
        random_sample_ids(91, 100, exclude=assigned)


def test_random_ids_without_seed_are_unpredictable() -> None:
    assert random_sample_ids(20, 10**9) != random_sample_ids(20, 10**9)


def test_receipt_binds_ids_and_order() -> None:
    ids = assign_samples(3, 4, "m", 32, 1000)
    receipt = sample_receipt(ids)
    assert len(receipt) == 64 and receipt == sample_receipt(list(ids))
    changed = [*ids[:-1], (ids[-1] + 1) % 1000]
    assert sample_receipt(changed) != receipt
    assert sample_receipt(ids[::-1]) != receipt
    assert sample_receipt(ids[:-1]) != receipt
    assert sample_receipt([]) != sample_receipt([0])
