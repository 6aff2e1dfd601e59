"""Known answers for the own-data evidence: relative gains, specificity, proof, usefulness."""

from __future__ import annotations

import math

import pytest

from subnet.scoring.evidence import Specificity, relative_gains, specificity, usefulness


def test_relative_gains_per_sample() -> None:
    assert relative_gains([2.0, 4.0], [1.0, 5.0]) == [0.5, -0.25]
    assert math.isnan(relative_gains([0.0], [1.0])[0])
    with pytest.raises(ValueError, match="losses before"):
        relative_gains([1.0], [])


def test_specificity_is_a_difference_of_paired_differences() -> None:
    # own - ref = [0.2, 0.4] (mean 0.3, var 0.02); rand - ref = [0.1, 0.1] (mean 0.1, var 0).
    spec = specificity([0.3, 0.5], [0.1, 0.1], [0.2, 0.3], [0.1, 0.2])
    assert spec.mean == pytest.approx(0.2)
    assert spec.se == pytest.approx(math.sqrt(0.02 / 2))


def test_the_reference_removes_what_every_update_does_to_a_sample() -> None:
    # Sample 2 is easy for every update: paired differences cancel it, so se is 0.
    spec = specificity([0.1, 0.9], [0.05, 0.85], [0.1, 0.9], [0.1, 0.9])
    assert spec == Specificity(pytest.approx(0.05), pytest.approx(0.0))


def test_proof_subtracts_z_standard_errors_and_floors_at_zero() -> None:
    assert Specificity(0.03, 0.01).proven(2.0) == pytest.approx(0.01)
    assert Specificity(0.01, 0.01).proven(2.0) == 0.0
    assert Specificity(math.nan, math.nan).proven(2.0) == 0.0


def test_non_finite_gains_give_no_proof() -> None:
    spec = specificity([math.nan], [0.0], [0.1], [0.0])
    assert spec.proven(0.0) == 0.0


def test_specificity_needs_samples_of_both_kinds_and_equal_pairs() -> None:
    with pytest.raises(ValueError, match="at least one"):
        specificity([], [], [0.1], [0.1])
    with pytest.raises(ValueError, match="reference gains"):
        specificity([0.1, 0.2], [0.1], [0.1], [0.1])


@pytest.mark.parametrize(
    ("r", "reference", "tolerance", "expected"),
    [
        (0.05, 0.05, 0.5, 1.0),
        (0.07, 0.05, 0.5, 1.0),
        (0.0375, 0.05, 0.5, 0.5),
        (0.025, 0.05, 0.5, 0.0),
        (-0.1, 0.05, 0.5, 0.0),
        (0.049, 0.05, 0.0, 0.0),  # no tolerance: below the median earns nothing
        (0.01, None, 0.5, 1.0),  # nothing to compare with
        (0.01, -0.02, 0.5, 1.0),
        (math.nan, 0.05, 0.5, 0.0),
    ],
)
def test_usefulness(r: float, reference: float | None, tolerance: float, expected: float) -> None:
    assert usefulness(r, reference, tolerance) == pytest.approx(expected)
