"""Known answers for window_score and score_window."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from subnet.scoring import (
    Evaluation,
    ScoringConfig,
    Specificity,
    Verdict,
    random_reference,
    score_window,
    window_score,
)

CFG = ScoringConfig()


def ev(
    after_assigned: float,
    after_random: float,
    hotkey: str = "m",
    specific: tuple[float, float] | None = (0.03, 0.005),
) -> Evaluation:
    """An evaluation whose 'before' losses are both 2.0, so relative gain = (2 - after) / 2.

    ``specific`` is the own-data excess (mean, standard error); None means no evidence.
    """
    spec = Specificity(*specific) if specific is not None else None
    return Evaluation(hotkey, 2.0, after_assigned, 2.0, after_random, spec)


def test_only_the_proven_excess_is_paid() -> None:
    # excess 0.03 +- 0.005 at proof_z 2 -> 0.02; the generic gain earns nothing by default.
    assert window_score(ev(1.9, 1.98), CFG) == pytest.approx(0.02)
    assert window_score(ev(1.9, 1.8), CFG) == pytest.approx(0.02)


def test_a_copy_proves_nothing_and_earns_nothing_however_much_it_helps() -> None:
    # A copied update helps the copier's samples no more than random ones: excess ~ 0.
    assert window_score(ev(1.8, 1.8, specific=(0.0, 0.004)), CFG) == 0.0
    assert window_score(ev(1.8, 1.8, specific=(0.007, 0.004)), CFG) == 0.0  # chance 1.75 se
    assert window_score(ev(1.8, 1.8, specific=None), CFG) == 0.0


def test_chance_excess_of_a_copier_is_worth_about_one_percent_of_honest_pay() -> None:
    # Expected pay of an excess ~ N(0, se): se * E[max(0, Z - 2)] = 0.0085 se; an honest
    # miner measured at 2.5 se gets 0.5 se: the copier's expectation is 1.7 % of it.
    rng = random.Random(1)
    se = 0.001
    pays = [window_score(ev(1.9, 1.9, specific=(rng.gauss(0, se), se)), CFG) for _ in range(20000)]
    honest = window_score(ev(1.9, 1.9, specific=(2.5 * se, se)), CFG)
    assert honest == pytest.approx(0.5 * se)
    assert sum(pays) / len(pays) / honest == pytest.approx(0.017, abs=0.006)


def test_unproven_credit_is_paid_only_on_top_of_a_proven_excess() -> None:
    cfg = ScoringConfig(unproven_credit=0.5)
    assert window_score(ev(1.9, 1.8), cfg) == pytest.approx(0.02 + 0.5 * 0.05)
    assert window_score(ev(1.9, 1.8, specific=(0.0, 0.005)), cfg) == 0.0


def test_damage_on_random_data_scores_zero() -> None:
    assert window_score(ev(1.9, 2.02), CFG) == 0.0


def test_noise_upload_that_raises_assigned_loss_scores_zero() -> None:
    assert window_score(ev(2.1, 2.1), CFG) == 0.0
    assert window_score(ev(2.0, 1.5), CFG) == 0.0  # no gain on assigned data, whatever random does


def test_min_improvement_is_a_strict_threshold() -> None:
    assert window_score(ev(1.9, 2.0), ScoringConfig(min_improvement=0.06)) == 0.0
    assert window_score(ev(1.9, 1.99), ScoringConfig(min_improvement=0.04)) == pytest.approx(0.02)


def test_an_update_weaker_on_unseen_data_than_the_median_loses_credit() -> None:
    # Reference r = 0.05; tolerance 0.5 -> full credit at r >= 0.05, none at r <= 0.025.
    assert window_score(ev(1.9, 1.9), CFG, r_reference=0.05) == pytest.approx(0.02)
    assert window_score(ev(1.9, 1.925), CFG, r_reference=0.05) == pytest.approx(0.01)
    assert window_score(ev(1.9, 1.96), CFG, r_reference=0.05) == 0.0


def test_the_window_reference_is_the_median_over_proven_uploads_only() -> None:
    evaluations = [
        ev(1.9, 1.90, "a"),  # r = 0.05
        ev(1.9, 1.92, "b"),  # r = 0.04
        ev(1.9, 1.88, "c"),  # r = 0.06
        ev(1.9, 1.99, "copier", specific=(0.0, 0.005)),  # proves nothing: not in the median
    ]
    assert random_reference(evaluations, CFG) == pytest.approx(0.05)
    verdicts = score_window(evaluations, (), (), (), {}, {}, CFG)
    assert verdicts["a"].score == pytest.approx(0.02)
    assert verdicts["b"].score == pytest.approx(0.02 * 0.6)  # (0.04 - 0.025) / 0.025
    assert verdicts["c"].score == pytest.approx(0.02)
    assert verdicts["copier"].score == 0.0
    assert random_reference([ev(1.9, 1.9, specific=None)], CFG) is None


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
    assert window_score(Evaluation("m", *losses, Specificity(0.03, 0.005)), CFG) == 0.0


def test_score_is_never_negative_and_never_exceeds_the_measured_excess() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        after_a, after_r = rng.uniform(1.0, 3.0), rng.uniform(1.0, 3.0)
        mean, se = rng.uniform(-0.1, 0.1), rng.uniform(0.0, 0.05)
        ref = rng.choice([None, rng.uniform(-0.1, 0.5)])
        score = window_score(ev(after_a, after_r, specific=(mean, se)), CFG, ref)
        assert 0.0 <= score <= max(0.0, mean) + 1e-12


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
        "good": Verdict("good", pytest.approx(0.02), "scored"),
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


def _with_heldout(after_random: float, after_heldout: float, hotkey: str = "m") -> Evaluation:
    base = ev(1.9, after_random, hotkey)
    return Evaluation(base.hotkey, 2.0, 1.9, 2.0, after_random, base.specific,
                      loss_before_heldout=2.0, loss_after_heldout=after_heldout)  # fmt: skip


def test_harm_on_the_reported_held_out_set_costs_credit_like_harm_on_train_data() -> None:
    # Proven 0.02; held-out gain 0.03 against a held-out median of 0.04: with harm_tolerance
    # 0.5 the credit is (0.03 - 0.02) / (0.04 - 0.02) = 0.5, whatever the train-data gain.
    assert window_score(_with_heldout(1.9, 1.94), CFG, 0.05, 0.04) == pytest.approx(0.01)
    # The smaller factor counts: train gain 0.0375 of 0.05 gives 0.5, held-out at the median 1.
    assert window_score(_with_heldout(1.925, 1.92), CFG, 0.05, 0.04) == pytest.approx(0.01)
    # At or below half the held-out median nothing is paid; at or above it, the full 0.02.
    assert window_score(_with_heldout(1.9, 1.97), CFG, 0.05, 0.04) == 0.0
    assert window_score(_with_heldout(1.9, 1.90), CFG, 0.05, 0.04) == pytest.approx(0.02)


def test_the_held_out_reference_is_the_median_over_proven_uploads() -> None:
    from subnet.scoring.window import heldout_reference

    evs = [_with_heldout(1.9, a, f"m{i}") for i, a in enumerate((1.98, 1.94, 1.90))]
    unproven = Evaluation("x", 2.0, 1.9, 2.0, 1.9, Specificity(0.0, 0.01),
                          loss_before_heldout=2.0, loss_after_heldout=2.5)  # fmt: skip
    assert heldout_reference([*evs, unproven], CFG) == pytest.approx(0.03)
    assert heldout_reference([ev(1.9, 1.9)], CFG) is None  # nobody measured a held-out draw


def test_score_window_holds_every_upload_to_the_held_out_median() -> None:
    evs = [_with_heldout(1.9, 1.92, "a"), _with_heldout(1.9, 1.92, "b"),
           _with_heldout(1.9, 1.98, "c")]  # fmt: skip
    scores = {hk: v.score for hk, v in score_window(evs, (), (), (), {}, {}, CFG).items()}
    # Median held-out gain 0.04; "c" gains 0.01, below half of it: 0. The others: full 0.02.
    assert scores == pytest.approx({"a": 0.02, "b": 0.02, "c": 0.0})


def test_a_non_finite_held_out_loss_rejects_the_upload() -> None:
    bad = Evaluation("m", 2.0, 1.9, 2.0, 1.9, Specificity(0.03, 0.005),
                     loss_before_heldout=2.0, loss_after_heldout=math.nan)  # fmt: skip
    assert score_window([bad], (), (), (), {}, {}, CFG)["m"].reason == "rejected"


def test_measures_are_what_the_score_was_computed_from() -> None:
    """Known answer: before 2.0, after 1.9 / 1.95 -> gains 0.05 / 0.025; non-finite -> None."""
    m = ev(1.9, 1.95, specific=(0.004, 0.001)).measures()
    assert m == {"assigned": 0.05, "random": 0.025, "heldout": None, "specific": 0.004,
                 "se": 0.001, "fraction": 1.0, "scale": 1.0}  # fmt: skip
    bad = Evaluation("m", 2.0, math.nan, 2.0, 1.9, Specificity(math.nan, math.nan)).measures()
    assert bad["assigned"] is None and bad["random"] is None and bad["specific"] is None


def test_a_lone_proven_upload_is_held_to_the_others_gains_not_to_its_own() -> None:
    # Seen in a loaded end-to-end run: no honest upload proved its work in a window (their
    # excess under 2 SE), and a noise upload's chance excess did. As its own median it passed
    # the harm check and took 0.47 of one validator's weights. Now it is held to the others'.
    honest = [ev(1.96, 1.96, f"h{i}", specific=(0.0005, 0.0004)) for i in range(3)]  # r 0.02
    noise = ev(1.999, 1.9992, "noise", specific=(0.0013, 0.0005))  # proven by chance; r 0.0004
    verdicts = score_window([*honest, noise], (), (), (), {}, {}, CFG)
    assert random_reference([*honest, noise], CFG, sender="noise") == pytest.approx(0.02)
    assert verdicts["noise"].score == 0.0
    # A lone proven honest upload among weaker ones keeps its pay.
    strong = ev(1.90, 1.90, "strong", specific=(0.03, 0.005))  # r 0.05
    assert score_window([*honest, strong], (), (), (), {}, {}, CFG)["strong"].score > 0.0
    # Others that did not even help their own samples set nothing: the check is off.
    idle = [ev(2.0, 1.99, f"i{i}", specific=(0.0, 0.001)) for i in range(3)]
    assert random_reference([*idle, noise], CFG, sender="noise") is None


def test_a_lone_honest_upload_is_paid_its_generic_gain_and_merged() -> None:
    # One miner in the window: nothing to prove an excess against (a lone honest miner's
    # excess, 0.001 +- 0.0006 measured, is unproven at 2 SE). It is paid min(a, r) instead.
    lone = ev(1.96, 1.97, "m", specific=(0.001, 0.0006))  # a 0.02, r 0.015
    verdict = score_window([lone], (), (), (), {}, {}, CFG)["m"]
    assert verdict.score == pytest.approx(0.015) and verdict.detail == "alone"
    # The same upload beside another one is held to the proven excess again: unpaid.
    other = ev(1.96, 1.97, "o", specific=(0.001, 0.0006))
    assert score_window([lone, other], (), (), (), {}, {}, CFG)["m"].score == 0.0


def test_a_lone_upload_that_harms_or_does_not_help_earns_nothing() -> None:
    for after_assigned, after_random in ((2.0, 1.9), (1.9, 2.0), (1.9, 2.1), (2.1, 1.9)):
        lone = ev(after_assigned, after_random, "m", specific=(0.05, 0.001))
        assert score_window([lone], (), (), (), {}, {}, CFG)["m"].score == 0.0


def test_a_copy_of_a_lone_upload_ends_the_lone_rule_for_both() -> None:
    # Copying the lone miner (a second evaluated upload, judged a copy or not) earns nothing
    # and does not get the lone pay: both are held to the proven excess.
    original = ev(1.96, 1.97, "m", specific=(0.001, 0.0006))
    copy = ev(1.96, 1.97, "c", specific=(0.0, 0.0006))
    verdicts = score_window([original, copy], (), (), (), {}, {"c": "m"}, CFG)
    assert verdicts["c"].score == 0.0 and verdicts["c"].reason == "copied"
    assert verdicts["m"].score == 0.0 and verdicts["m"].detail == ""


def test_a_lone_partial_upload_is_paid_its_fraction() -> None:
    lone = replace(ev(1.96, 1.97, "m", specific=(0.0, 0.001)), fraction=0.5)
    assert score_window([lone], (), (), (), {}, {}, CFG)["m"].score == pytest.approx(0.0075)
