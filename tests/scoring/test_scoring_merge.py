"""Known answers for merge_weights: medians over trusted validators, and the units fallback."""

from __future__ import annotations

import math

import pytest

from subnet.scoring import merge_weights
from subnet.scoring.merge import MAX_SHARE, cap_shares

TRUSTED = {"v1", "v2", "v3"}
UNITS = {"m1": 100, "m2": 300, "m3": 100}


def test_median_of_trusted_validators_ignores_an_untrusted_outlier() -> None:
    reports = {
        "v1": {"m1": 0.1, "m2": 0.2, "m3": 0.0},
        "v2": {"m1": 0.3, "m2": 0.6, "m3": -0.1},
        "v3": {"m1": 0.2, "m2": 0.4, "m3": 0.5},
        "evil": {"m1": 0.0, "m2": 0.0, "m3": 100.0},  # would lift m3's median to 0.25
    }
    # medians: m1 0.2, m2 0.4, m3 0.0 -> weight 0
    assert merge_weights(reports, TRUSTED, UNITS) == pytest.approx(
        {"m1": 1 / 3, "m2": 2 / 3, "m3": 0.0}
    )


def test_a_validator_silent_on_a_miner_is_left_out_of_its_median() -> None:
    reports = {"v1": {"m1": 0.1}, "v2": {"m1": 0.3, "m2": 0.2}}
    # m1: median(0.1, 0.3) = 0.2; m2: median(0.2) = 0.2 (not median(0, 0.2) = 0.1); m3 unscored
    assert merge_weights(reports, TRUSTED, UNITS) == pytest.approx(
        {"m1": 0.5, "m2": 0.5, "m3": 0.0}
    )


def test_non_finite_reported_scores_are_ignored() -> None:
    reports = {"v1": {"m1": math.nan, "m2": 1.0}, "v2": {"m1": 1.0, "m2": math.inf}}
    assert merge_weights(reports, TRUSTED, {"m1": 1, "m2": 1}) == pytest.approx(
        {"m1": 0.5, "m2": 0.5}
    )


def test_units_fallback_when_no_trusted_validator_scored() -> None:
    expected = {"m1": 0.2, "m2": 0.6, "m3": 0.2}
    assert merge_weights({}, TRUSTED, UNITS) == pytest.approx(expected)
    only_untrusted = {"evil": {"m1": 1.0}}
    assert merge_weights(only_untrusted, TRUSTED, UNITS) == pytest.approx(expected)
    about_others = {"v1": {"not_a_contributor": 1.0}}
    assert merge_weights(about_others, TRUSTED, UNITS) == pytest.approx(expected)


def test_all_zero_gives_empty() -> None:
    zero_scores = {"v1": {"m1": 0.0, "m2": -1.0, "m3": 0.0}}
    assert merge_weights(zero_scores, TRUSTED, UNITS) == {}
    assert merge_weights({}, TRUSTED, {"m1": 0, "m2": 0}) == {}
    assert merge_weights({}, TRUSTED, {}) == {}


def test_no_sender_takes_more_than_max_share_honest_shares_and_the_rest_is_not_merged() -> None:
    # Probation: one of ten senders is verified and paid; the nine others are scored 0.
    contributors = {f"m{i}": 1 for i in range(10)}
    reports = {"v1": {"m0": 0.5, **{f"m{i}": 0.0 for i in range(1, 10)}}}
    weights = merge_weights(reports, TRUSTED, contributors)
    assert weights["m0"] == pytest.approx(MAX_SHARE / 10)
    assert sum(weights.values()) == pytest.approx(MAX_SHARE / 10)  # a fifth of the step
    # Everyone paid alike: nobody is near the cap and the whole step is merged.
    even = {"v1": dict.fromkeys(contributors, 0.5)}
    assert merge_weights(even, TRUSTED, contributors) == pytest.approx(
        dict.fromkeys(contributors, 0.1)
    )
    assert cap_shares({"a": 0.7, "b": 0.3}, 1.0) == {"a": 0.5, "b": 0.3}
