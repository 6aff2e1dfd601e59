"""Which uploads a validator evaluates (``scoring.sample``) and the standing it keeps between
evaluations (``update_moving``)."""

from __future__ import annotations

import pytest

from subnet.scoring import update_moving
from subnet.scoring.config import ScoringConfig
from subnet.scoring.sample import evaluated, with_matched

UPLOADS = [f"m{i}" for i in range(10)]
VALS = ["v0", "v1", "v2"]


def test_validators_evaluate_different_established_uploads_from_the_beacon() -> None:
    picks = [evaluated("beef", "r", "g", 4, UPLOADS, (), VALS, v, 3) for v in VALS]
    assert all(len(p) == 3 for p in picks)
    assert len(set().union(*picks)) == 9  # 3 validators x 3, disjoint
    assert picks[0] == evaluated("beef", "r", "g", 4, UPLOADS, (), VALS, "v0", 3)
    assert picks[0] != evaluated("cafe", "r", "g", 4, UPLOADS, (), VALS, "v0", 3)
    # over windows each upload is evaluated about V x B / N of the time
    seen = dict.fromkeys(UPLOADS, 0)
    for w in range(600):
        for v in VALS:
            for hk in evaluated(f"b{w}", "r", "g", w, UPLOADS, (), VALS, v, 3):
                seen[hk] += 1
    assert all(abs(n / 600 - 0.9) < 0.08 for n in seen.values()), seen


def test_fresh_senders_take_half_the_evaluations_and_no_more() -> None:
    fresh = [f"n{i}" for i in range(20)]  # a flood of senders without standing
    counts = dict.fromkeys(UPLOADS, 0)
    for w in range(600):
        got = evaluated(f"b{w}", "r", "g", w, UPLOADS + fresh, fresh, VALS, "v0", 4)
        assert len(got) == 4
        for hk in got & set(UPLOADS):
            counts[hk] += 1
    # the established are re-evaluated at B / 2N a window at least, whatever the flood does
    assert all(n / 600 > 0.5 * 4 / 2 / 10 for n in counts.values()), counts
    one = evaluated("b1", "r", "g", 1, UPLOADS + ["n0"], ["n0"], VALS, "v0", 2)
    many = [evaluated(f"b{w}", "r", "g", w, UPLOADS + ["n0"], ["n0"], VALS, "v0", 2)
            for w in range(40)]  # fmt: skip
    assert sum("n0" in m for m in many) > 25 and len(one) == 2  # 3/4 of windows: 1 - 1/2^2


def test_every_upload_without_a_budget_or_with_room_and_a_secret_draw_without_a_beacon() -> None:
    assert evaluated("beef", "r", "g", 4, UPLOADS, (), VALS, "v0", 0) == set(UPLOADS)
    assert evaluated("beef", "r", "g", 4, UPLOADS[:2], (), VALS, "v0", 2) == set(UPLOADS[:2])
    secret = evaluated(None, "r", "g", 4, UPLOADS, (), VALS, "v0", 3)
    assert len(secret) == 3 and secret <= set(UPLOADS)


def test_matched_uploads_are_evaluated_up_to_the_budget_and_the_rest_held() -> None:
    got, held = with_matched({"m0"}, [("m1", "m2"), ("m0", "m3"), ("m4", "m5")], 3)
    assert got == {"m0", "m1", "m2", "m3"} and held == {"m4", "m5"}
    assert with_matched({"m0"}, [("m4", "m5")], 0) == ({"m0", "m4", "m5"}, set())


def test_standing_is_kept_between_evaluations_and_a_newcomers_first_ones_are_a_mean() -> None:
    cfg = ScoringConfig(ema_alpha=0.3)
    registered = {"a", "b", "c"}
    moving = {"a": 0.5, "b": 0.5, "c": 0.5}
    out = update_moving(moving, {"a": 1.0}, registered, cfg, kept={"b"})
    assert out == pytest.approx({"a": 0.65, "b": 0.5, "c": 0.35})  # c sent nothing: decays
    # a newcomer evaluated twice: the mean of its two scores, not 0.3 and then 0.51 of them
    first = update_moving({}, {"n": 0.2}, {"n"}, cfg, counts={"n": 1})
    second = update_moving(first, {"n": 0.4}, {"n"}, cfg, counts={"n": 2})
    assert first["n"] == pytest.approx(0.2) and second["n"] == pytest.approx(0.3)
    later = update_moving(second, {"n": 1.0}, {"n"}, cfg, counts={"n": 9})
    assert later["n"] == pytest.approx(0.7 * 0.3 + 0.3)  # past 1 / alpha: the EMA
