"""Known answers for index_overlap and detect_copies."""

from __future__ import annotations

import itertools

import pytest

from subnet.scoring import ScoringConfig, Upload, detect_copies, index_overlap

CFG = ScoringConfig(copy_overlap=0.9)

A = frozenset(range(0, 100))
B = frozenset(range(5, 105))  # 95 shared with A
C = frozenset(range(13, 113))  # 92 shared with B, only 87 with A
D = frozenset(range(50, 150))  # 50 shared with A: honest, correlated but different


def test_index_overlap_divides_by_the_smaller_set() -> None:
    assert index_overlap(A, B) == pytest.approx(0.95)
    assert index_overlap(A, frozenset(range(0, 50))) == 1.0  # a subset is a full copy
    assert index_overlap(A, frozenset()) == 0.0


def test_later_uploader_is_the_copier_and_chains_point_to_the_original() -> None:
    uploads = [
        Upload("a", (10, 1.0, "a"), A),
        Upload("b", (11, 0.0, "b"), B),
        Upload("c", (11, 5.0, "c"), C),
        Upload("d", (12, 0.0, "d"), D),
    ]
    expected = {"b": "a", "c": "a"}  # c matches only b, yet points to a
    for perm in itertools.permutations(uploads):
        assert detect_copies(perm, CFG) == expected


def test_reversed_order_reverses_who_copied() -> None:
    uploads = [Upload("a", (3,), A), Upload("b", (2,), B), Upload("c", (1,), C)]
    assert detect_copies(uploads, CFG) == {"a": "c", "b": "c"}


def test_below_threshold_overlap_is_not_a_copy_and_threshold_is_inclusive() -> None:
    assert detect_copies([Upload("a", (1,), A), Upload("d", (2,), D)], CFG) == {}
    exactly_90 = frozenset(range(10, 110))
    assert detect_copies([Upload("a", (1,), A), Upload("x", (2,), exactly_90)], CFG) == {"x": "a"}
    assert detect_copies([Upload("a", (1,), A), Upload("c", (2,), C)], CFG) == {}


def test_order_ties_are_broken_by_hotkey() -> None:
    uploads = [Upload("z", (7,), A), Upload("y", (7,), A)]
    assert detect_copies(uploads, CFG) == {"z": "y"}


def test_empty_uploads_match_nothing() -> None:
    uploads = [Upload("a", (1,), frozenset()), Upload("b", (2,), frozenset())]
    assert detect_copies(uploads, CFG) == {}


def test_duplicate_hotkeys_are_refused() -> None:
    with pytest.raises(ValueError, match="same hotkey"):
        detect_copies([Upload("a", (1,), A), Upload("a", (2,), D)], CFG)


def test_upload_matching_two_originals_points_to_the_earliest() -> None:
    first, second = frozenset(range(0, 100)), frozenset(range(15, 115))  # 85 shared: both original
    both = frozenset(range(5, 105))  # 95 shared with first, 90 with second
    uploads = [Upload("s", (2,), second), Upload("x", (3,), both), Upload("f", (1,), first)]
    assert detect_copies(uploads, CFG) == {"x": "f"}
