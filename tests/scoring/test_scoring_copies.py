"""Known answers for index_overlap and detect_copies."""

from __future__ import annotations

import itertools

import pytest

from subnet.scoring import (
    FingerprintLog,
    Match,
    ScoringConfig,
    Upload,
    detect_copies,
    find_matches,
    index_overlap,
    judge_matches,
    overlap_summary,
    twins,
)

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


# Evidence-based copy checks: fingerprint matches, and the own-data fit that decides them.

V = frozenset(range(100))  # the victim's top-k set
V_SUBSET = frozenset(range(0, 100, 2))  # a copier that sends half of it
HONEST = frozenset(range(80, 180))  # an honest upload: 20 % overlap


def test_find_matches_lists_both_directions_within_a_window_and_replays_of_kept_windows() -> None:
    current = {"victim": V, "copier": V_SUBSET, "honest": HONEST}
    history = {(4, "victim"): V, (4, "honest"): frozenset(range(500, 600)), (7, "victim"): V}
    matches = find_matches(5, current, history, CFG)
    assert matches == [
        Match("copier", "victim", 4, 1.0),
        Match("copier", "victim", 5, 1.0),
        Match("victim", "victim", 4, 1.0),  # the same fingerprint as its own last upload
        Match("victim", "copier", 5, 1.0),
    ]  # window 7 is not in the past; honest matches nothing


def test_judge_flags_the_side_whose_update_fits_the_other_samples_better_whatever_the_order() -> (
    None
):
    a_to_b, b_to_a = Match("a", "b", 5, 1.0), Match("b", "a", 5, 1.0)
    # One update, two sample sets: it fits b's samples (0.004) better than a's (0.0001).
    fits = {a_to_b: (0.0001, 0.004), b_to_a: (0.004, 0.0001)}
    assert judge_matches([a_to_b, b_to_a], fits) == {"a": "b@5"}
    assert judge_matches([b_to_a, a_to_b], fits) == {"a": "b@5"}


def test_judge_never_flags_an_upload_that_fits_its_own_samples_best() -> None:
    m = Match("m", "m", 4, 0.95)  # an honest miner whose update resembles its last one
    assert judge_matches([m], {m: (0.003, 0.0005)}) == {}
    assert judge_matches([m], {}) == {}  # no evidence, no verdict


def test_a_noise_flip_inside_the_margin_flags_no_one() -> None:
    # A copy pair whose measurements came out nearly even (the victim's own excess measured low,
    # its fit to the copier's samples high by chance): within copy_z standard errors of the
    # difference nobody is flagged; the copy then proves nothing on its own samples anyway.
    a_to_b, b_to_a = Match("a", "b", 5, 1.0), Match("b", "a", 5, 1.0)
    flip = {a_to_b: (0.0012, 0.0010, 0.0006), b_to_a: (0.0010, 0.0012, 0.0006)}
    assert judge_matches([a_to_b, b_to_a], flip) == {"b": "a@5"}  # no margin: the victim b
    assert judge_matches([a_to_b, b_to_a], flip, z=1.0) == {}
    clear = {a_to_b: (0.0001, 0.004, 0.0006), b_to_a: (0.004, 0.0001, 0.0006)}
    assert judge_matches([a_to_b, b_to_a], clear, z=1.0) == {"a": "b@5"}  # 6.5 SE: the copy


def test_another_miners_earlier_upload_is_a_replay_whatever_the_fits_say() -> None:
    # Near-even measurements: between two uploads of window 5 the margin keeps either from
    # being flagged; an upload that nearly shares the top-k set of another miner's upload of
    # window 4 (public before window 5 began) is a replay even when it fits its own samples
    # better, and even unmeasured; a miner's own earlier upload is judged on the plain
    # comparison, without the margin.
    same, old, own_old = Match("b", "a", 5, 1.0), Match("b", "a", 4, 0.93), Match("b", "b", 4, 1.0)
    even = (0.0010, 0.0012, 0.0006)
    assert judge_matches([same], {same: even}, z=1.0, window=5) == {}
    assert judge_matches([old], {old: (0.0012, 0.0010, 0.0006)}, z=1.0, window=5) == {"b": "a@4"}
    assert judge_matches([old], {}, z=1.0, window=5) == {"b": "a@4"}
    assert judge_matches([own_old], {own_old: even}, z=1.0, window=5) == {"b": "b@4"}
    assert judge_matches([own_old], {own_old: (0.0012, 0.0010, 0.0006)}, window=5) == {}


def test_judge_names_the_best_fitting_source() -> None:
    m1, m2 = Match("c", "x", 3, 0.9), Match("c", "y", 4, 0.95)
    assert judge_matches([m1, m2], {m1: (0.0, 0.005), m2: (0.0, 0.002)}) == {"c": "x@3"}


def test_fingerprint_log_keeps_the_last_windows_only() -> None:
    log = FingerprintLog(keep=2)
    for w in range(4):
        log.record(w, {"m": {w, w + 10}})
    assert set(log.recent(4)) == {(2, "m"), (3, "m")}
    assert set(log.recent(3)) == {(2, "m")}
    # kept as fingerprints of the log's salt: a set {3, 13} overlaps them exactly
    assert index_overlap(log.recent(4)[(3, "m")], {3, 13}) == 1.0
    assert index_overlap(log.recent(4)[(2, "m")], {3, 13}) == 0.0
    assert FingerprintLog(keep=0).recent(1) == {}


def test_overlap_summary_reports_the_largest_overlap_per_upload() -> None:
    summary = overlap_summary(
        {"a": V, "b": HONEST, "c": frozenset({0})}, {(1, "a"): V_SUBSET}, top=1
    )
    assert summary == {"a": {"c": 1.0, "1/a": 1.0}, "b": {"a": 0.2, "1/a": 0.2},
                       "c": {"a": 1.0, "1/a": 1.0}}  # fmt: skip


def test_twins_group_the_window_s_near_identical_uploads_under_their_first_hotkey() -> None:
    matches = [Match("b", "c", 5, 0.92), Match("c", "b", 5, 0.92), Match("a", "b", 5, 0.95),
               Match("b", "a", 5, 0.95), Match("d", "a", 4, 1.0), Match("e", "e", 4, 1.0)]  # fmt: skip
    # a-b and b-c chain into one group; a past window's match (d replays a@4) and a self-replay
    # are not twins of this window.
    assert twins(matches, 5) == {"a": "a", "b": "a", "c": "a"}
    assert twins(matches, 4) == {"a": "a", "d": "a"}
    assert twins([], 5) == {}
