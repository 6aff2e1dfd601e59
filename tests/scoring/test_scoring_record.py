"""Known answers for the track record (``subnet.scoring.record``) and how scoring uses it."""

from __future__ import annotations

import math
import random

import pytest
from pydantic import ValidationError

from subnet.scoring import (
    Evaluation,
    ScoringConfig,
    Specificity,
    extend_records,
    gain_ratios,
    random_reference,
    score_window,
    window_score,
)
from subnet.scoring.record import RATIO_RANGE, gain_ratio, record_credit
from subnet.scoring.window import heldout_reference

CFG = ScoringConfig()  # record_full 0.95, record_floor 0.88


def ev(after_random: float, hotkey: str = "m", specific=(0.03, 0.005)) -> Evaluation:
    """'Before' losses 2.0, assigned gain 0.05: r = (2 - after_random) / 2; proven 0.02."""
    spec = Specificity(*specific) if specific is not None else None
    return Evaluation(hotkey, 2.0, 1.9, 2.0, after_random, spec)


def test_a_gain_ratio_is_clipped_and_needs_a_positive_reference() -> None:
    assert gain_ratio(0.04, 0.05) == pytest.approx(0.8)
    assert gain_ratio(-0.01, 0.05) == RATIO_RANGE[0] == 0.7
    assert gain_ratio(0.5, 0.05) == RATIO_RANGE[1] == 1.3
    assert gain_ratio(0.04, None) is None
    assert gain_ratio(0.04, 0.0) is None
    assert gain_ratio(math.nan, 0.05) is None


def test_a_record_keeps_the_last_windows_and_forgets_deregistered_hotkeys() -> None:
    records = {"a": [1.0, 0.9], "gone": [1.0]}
    out = extend_records(records, {"a": 0.8, "b": 1.1}, keep=2, registered={"a", "b", "c"})
    assert out == {"a": [0.9, 0.8], "b": [1.1]}  # c: never measured, so no record yet
    assert extend_records(out, {}, keep=2, registered={"a", "b"}) == out  # a missed window
    assert extend_records(out, {"a": 1.0}, keep=0, registered={"a"}) == {}
    assert records == {"a": [1.0, 0.9], "gone": [1.0]}  # the input is not changed


def test_record_credit_is_linear_between_floor_and_full() -> None:
    assert record_credit([1.0, 0.9], 0.95, 0.88) == 1.0  # mean 0.95
    assert record_credit([0.915], 0.95, 0.88) == pytest.approx(0.5)
    assert record_credit([0.8, 0.96], 0.95, 0.88) == 0.0  # mean 0.88
    assert record_credit([], 0.95, 0.88) == 1.0
    assert record_credit([math.nan], 0.95, 0.88) == 0.0


def test_the_floor_must_be_below_full_credit() -> None:
    with pytest.raises(ValidationError, match="record_floor"):
        ScoringConfig(record_floor=0.95, record_full=0.95)


def test_gain_ratios_are_against_the_median_of_proven_uploads() -> None:
    evaluations = [ev(1.90, "a"), ev(1.92, "b"), ev(1.88, "c"), ev(1.99, "x", specific=None)]
    ratios = gain_ratios(evaluations, CFG)  # median r 0.05 over a, b, c
    assert ratios == pytest.approx({"a": 1.0, "b": 0.8, "c": 1.2})  # x proves nothing: no entry
    assert gain_ratios([ev(1.9, specific=None)], CFG) == {}  # no proven upload, no reference


def test_a_bias_inside_one_window_s_spread_loses_its_pay_across_windows() -> None:
    # Per window the biased upload is at 0.9 of the median: the per-window check (harm_tolerance
    # 0.5) still pays it 0.8 of its proven excess. Its record of 0.9, 0.88, 0.86 is not.
    one = window_score(ev(1.91), CFG, r_reference=0.05)
    assert one == pytest.approx(0.02 * 0.8)
    assert window_score(ev(1.91), CFG, 0.05, record=[0.9]) == pytest.approx(0.02 * 2 / 7)
    assert window_score(ev(1.91), CFG, 0.05, record=[0.9, 0.88, 0.86]) == 0.0
    # An honest miner below the median this window keeps its credit on its record.
    assert window_score(ev(1.91), CFG, 0.05, record=[1.1, 1.0, 0.9]) == pytest.approx(one)
    assert window_score(ev(1.91), CFG.model_copy(update={"record_windows": 0}), 0.05,
                        record=[0.5]) == pytest.approx(one)  # fmt: skip


def test_score_window_judges_each_sender_on_its_own_record() -> None:
    evaluations = [ev(1.90, "a"), ev(1.92, "b"), ev(1.88, "c")]
    records = extend_records({"b": [0.8, 0.85]}, gain_ratios(evaluations, CFG), 8, {"a", "b", "c"})
    verdicts = score_window(evaluations, (), (), (), {}, {}, CFG, records)
    assert verdicts["a"].score == pytest.approx(0.02)
    assert verdicts["b"].score == 0.0  # record mean 0.817
    assert verdicts["c"].score == pytest.approx(0.02)
    alone = score_window(evaluations, (), (), (), {}, {}, CFG)  # no records: none judged
    assert alone["b"].score == pytest.approx(0.02 * 0.6)


def test_honest_miners_keep_their_credit_where_a_steady_bias_loses_it() -> None:
    # Honest ratios spread about 0.15 around the median window by window; a poisoner's are 0.8 of
    # the median on average (a bias that cancels a fifth of its gain on unseen data), inside
    # that spread. Through the clip and the 8-window records the honest miners keep nearly all
    # their credit and the poisoner almost none. (At 0.85 it keeps about a sixth: a smaller
    # bias is paid more.)
    rng = random.Random(7)
    names = [*(f"m{i}" for i in range(6)), "poisoner"]
    records: dict[str, list[float]] = {}
    honest, bias = [], []
    for _ in range(40):
        gains = {h: rng.gauss(0.8 if h == "poisoner" else 1.0, 0.15) for h in names}
        ratios = {h: gain_ratio(g, 1.0) for h, g in gains.items()}
        records = extend_records(records, ratios, CFG.record_windows, set(names))
        credit = {h: record_credit(records[h], CFG.record_full, CFG.record_floor) for h in names}
        honest += [credit[h] for h in names[:-1]]
        bias.append(credit["poisoner"])
    assert all(len(v) == 8 for v in records.values())
    assert sum(honest[6 * 8 :]) / len(honest[6 * 8 :]) > 0.9
    assert sum(bias[8:]) / len(bias[8:]) < 0.05


def test_uploads_that_are_never_paid_do_not_set_the_median() -> None:
    # Honest r 0.05, 0.04, 0.06: median 0.05. Four sybil copies of the strongest (r 0.08, judged
    # copies), a memorizer that harms random data and one with no assigned-data gain would raise
    # or sink it for free if they counted.
    honest = [ev(1.90, "a"), ev(1.92, "b"), ev(1.88, "c")]
    sybils = [ev(1.84, f"copy{i}") for i in range(4)]
    harmful = Evaluation("harm", 2.0, 1.9, 2.0, 2.02, Specificity(0.03, 0.005))
    idle = Evaluation("idle", 2.0, 2.0, 2.0, 1.80, Specificity(0.03, 0.005))
    everyone = [*honest, *sybils, harmful, idle]
    copies = {f"copy{i}": "c" for i in range(4)}
    ratios = gain_ratios(everyone, CFG, copies)
    assert ratios == pytest.approx({"a": 1.0, "b": 0.8, "c": 1.2})
    verdicts = score_window(everyone, (), (), (), {}, copies, CFG)
    assert verdicts["b"].score == pytest.approx(0.02 * 0.6)  # against 0.05, as without them


def test_claiming_fewer_steps_loosens_no_harm_check() -> None:
    # The fraction is a claim (a receipt for a prefix of public ids): a partial upload is held to
    # the full uploads' median like any other, in the window and in its record.
    full = [ev(1.90, "a"), ev(1.92, "b"), ev(1.88, "c")]  # median r 0.05
    third = Evaluation("p", 2.0, 1.9, 2.0, 1.965, Specificity(0.03, 0.005), fraction=1 / 3)
    ratios = gain_ratios([*full, third], CFG)
    assert ratios["p"] == pytest.approx(0.7)  # r 0.0175 / 0.05 = 0.35, clipped
    assert window_score(third, CFG, 0.05) == 0.0  # below half the median
    records = extend_records({}, ratios, 8, {"a", "b", "c", "p"})
    verdicts = score_window([*full, third], (), (), (), {}, {}, CFG, records)
    assert verdicts["p"].score == 0.0 and verdicts["a"].score == pytest.approx(0.02)
    # A partial upload at the median keeps its credit and is paid its fraction.
    fair = Evaluation("p", 2.0, 1.9, 2.0, 1.90, Specificity(0.03, 0.005), fraction=0.5)
    assert window_score(fair, CFG, 0.05, record=[1.0]) == pytest.approx(0.01)


def test_full_uploads_set_the_median_when_they_are_at_least_half() -> None:
    full = [ev(1.90, "a"), ev(1.92, "b")]  # r 0.05, 0.04
    partial = [Evaluation(f"p{i}", 2.0, 1.9, 2.0, 1.98, Specificity(0.03, 0.005), fraction=0.5)
               for i in range(2)]  # fmt: skip
    assert random_reference([*full, *partial], CFG) == pytest.approx(0.045)  # 2 of 4 full
    many = [*partial, Evaluation("p9", 2.0, 1.9, 2.0, 1.98, Specificity(0.03, 0.005), fraction=0.5)]
    assert random_reference([full[0], *many], CFG) == pytest.approx(0.01)  # 1 of 4: all count


def test_a_median_at_or_below_zero_never_switches_the_held_out_check_off() -> None:
    def held(hk: str, after: float) -> Evaluation:
        return Evaluation(hk, 2.0, 1.9, 2.0, 1.9, Specificity(0.03, 0.005), 1.0, 2.0, after)

    evaluations = [held("a", 1.9), held("s1", 2.02), held("s2", 2.02), held("s3", 2.02)]
    assert heldout_reference(evaluations, CFG) == pytest.approx(0.05)  # only a's gain is > 0


def test_one_bad_window_does_not_cost_the_next_seven() -> None:
    # An honest record of 1.0s with one window at a tenth of the median (clipped to 0.7).
    record = [1.0] * 7 + [gain_ratio(0.005, 0.05)]
    assert record_credit(record, CFG.record_full, CFG.record_floor) == 1.0  # mean 0.9625
