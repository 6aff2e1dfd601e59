"""Known answers for update_moving, weights_for_chain and the config."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from subnet.scoring import ScoringConfig, update_moving, weights_for_chain

CFG = ScoringConfig(ema_alpha=0.3)


def test_ema_updates_decays_missing_starts_new_and_drops_deregistered() -> None:
    moving = {"a": 1.0, "b": 0.5, "gone": 0.9}
    window = {"a": 1.0, "new": 0.2, "stranger": 5.0}
    out = update_moving(moving, window, {"a", "b", "new"}, CFG)
    assert out == pytest.approx({"a": 1.0, "b": 0.35, "new": 0.06})
    assert set(out) == {"a", "b", "new"}


def test_missing_hotkey_decays_geometrically() -> None:
    moving = {"a": 1.0}
    for _ in range(5):
        moving = update_moving(moving, {}, {"a"}, CFG)
    assert moving["a"] == pytest.approx(0.7**5)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.1])
def test_bad_window_score_is_an_error_not_a_poisoned_average(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        update_moving({"a": 1.0}, {"a": bad}, {"a"}, CFG)


def test_weights_for_chain_normalizes_positive_scores_of_hotkeys_with_uids() -> None:
    moving = {"a": 3.0, "b": 1.0, "c": 0.0, "d": 2.0, "e": -1.0}
    uids = {"a": 5, "b": 2, "c": 7, "e": 9}  # d has no uid
    weights = weights_for_chain(moving, uids)
    assert weights == pytest.approx({2: 0.25, 5: 0.75})
    assert list(weights) == [2, 5]


def test_weights_for_chain_is_empty_when_nobody_scored() -> None:
    assert weights_for_chain({"a": 0.0, "b": 0.0}, {"a": 0, "b": 1}) == {}
    assert weights_for_chain({"a": 1.0}, {}) == {}


def test_weights_for_chain_refuses_shared_uids() -> None:
    with pytest.raises(ValueError, match="share one uid"):
        weights_for_chain({"a": 1.0}, {"a": 1, "b": 1})


def test_config_is_strict_and_frozen() -> None:
    with pytest.raises(ValidationError):
        ScoringConfig(ema_alpa=0.3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ScoringConfig(ema_alpha=0.0)
    with pytest.raises(ValidationError):
        ScoringConfig(copy_overlap=1.5)
    with pytest.raises(ValidationError):
        CFG.ema_alpha = 0.5  # type: ignore[misc]
    assert ScoringConfig() == ScoringConfig(ema_alpha=0.3, copy_overlap=0.9, min_improvement=0.0)
