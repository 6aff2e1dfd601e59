"""Known answers for window_score and score_window."""

from __future__ import annotations

import math
import random

import pytest

from subnet.scoring import Evaluation, ScoringConfig, Verdict, score_window, window_score

CFG = ScoringConfig()


def ev(after_assigned: float, after_random: float, hotkey: str = "m") -> Evaluation:
    """An evaluation whose 'before' losses are both 2.0, so relative gain = (2 - after) / 2."""
    return Evaluation(hotkey, 2.0, after_assigned, 2.0, after_random)


def test_assigned_gain_beyond_random_gets_full_credit_for_the_excess() -> None:
    # a = 0.05, r = 0.01: excess 0.04 at full credit, shared 0.01 at half credit.
    assert window_score(ev(1.9, 1.98), CFG) == pytest.approx(0.045)


def test_update_that_helps_random_as_much_earns_only_unproven_credit() -> None:
    # a = 0.05, r = 0.10: all of the gain is shared with random data.
    assert window_score(ev(1.9, 1.8), CFG) == pytest.approx(0.025)
    assert window_score(ev(1.9, 1.9), CFG) == pytest.approx(0.025)


def test_damage_on_random_data_is_subtracted() -> None:
    # a = 0.05, r = -0.01 -> 0.04; r = -0.10 -> floored at 0.
    assert window_score(ev(1.9, 2.02), CFG) == pytest.approx(0.04)
    assert window_score(ev(1.9, 2.2), CFG) == 0.0


def test_noise_upload_that_raises_assigned_loss_scores_zero() -> None:
    assert window_score(ev(2.1, 2.1), CFG) == 0.0
    assert window_score(ev(2.0, 1.5), CFG) == 0.0  # no gain on assigned data, whatever random does


def test_min_improvement_is_a_strict_threshold() -> None:
    assert window_score(ev(1.9, 2.0), ScoringConfig(min_improvement=0.06)) == 0.0
    assert window_score(ev(1.9, 2.0), ScoringConfig(min_improvement=0.04)) == pytest.approx(0.05)


def test_unproven_credit_scales_the_shared_part() -> None:
    assert window_score(ev(1.9, 1.8), ScoringConfig(unproven_credit=1.0)) == pytest.approx(0.05)
    assert window_score(ev(1.9, 1.8), ScoringConfig(unproven_credit=0.0)) == 0.0


@pytest.mark.parametrize(
    "losses",
    [
        (math.nan, 1.9, 2.0, 1.9),
        (2.0, math.nan, 2.0, 1.9),
        (2.0, 1.9, math.inf, 1.9),
        (2.0, -math.inf, 2.0, 1.9),
        (0.0, -1.0, 2.0, 1.9),  # a zero 'before' loss has no relative gain
    ],
)
def test_non_finite_or_degenerate_losses_score_zero(losses: tuple[float, ...]) -> None:
    assert window_score(Evaluation("m", *losses), CFG) == 0.0


def test_score_is_never_negative_and_never_exceeds_assigned_gain() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        after_a, after_r = rng.uniform(1.0, 3.0), rng.uniform(1.0, 3.0)
        score = window_score(ev(after_a, after_r), CFG)
        assert 0.0 <= score <= max(0.0, (2.0 - after_a) / 2.0) + 1e-12


def test_score_window_gives_every_hotkey_one_verdict_by_precedence() -> None:
    verdicts = score_window(
        evaluations=[ev(1.9, 1.98, "good"), ev(1.9, 1.98, "copier"), ev(2.0, 1.9, "lazy")],
        missing={"gone", "late_and_gone"},
        late={"slow", "late_and_gone"},
        stale={"old"},
        rejected={"forged": "bad_signature"},
        copies={"copier": "good"},
        cfg=CFG,
    )
    assert verdicts == {
        "copier": Verdict("copier", 0.0, "copied", "good"),
        "forged": Verdict("forged", 0.0, "rejected", "bad_signature"),
        "gone": Verdict("gone", 0.0, "missing"),
        "good": Verdict("good", pytest.approx(0.045), "scored"),
        "late_and_gone": Verdict("late_and_gone", 0.0, "missing"),
        "lazy": Verdict("lazy", 0.0, "scored"),
        "old": Verdict("old", 0.0, "stale"),
        "slow": Verdict("slow", 0.0, "late"),
    }
    assert list(verdicts) == sorted(verdicts)


def test_score_window_rejects_non_finite_losses_with_a_reason() -> None:
    bad = Evaluation("m", 2.0, math.nan, 2.0, 1.9)
    verdicts = score_window([bad], (), (), (), {}, {}, CFG)
    assert verdicts == {"m": Verdict("m", 0.0, "rejected", "non_finite_loss")}


def test_score_window_refuses_two_evaluations_of_one_hotkey() -> None:
    with pytest.raises(ValueError, match="two evaluations"):
        score_window([ev(1.9, 1.9), ev(1.8, 1.9)], (), (), (), {}, {}, CFG)
