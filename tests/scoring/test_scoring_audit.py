"""The pure part of audits: the beacon's draw, relative errors, the first failing part."""

from __future__ import annotations

import math

import pytest
import torch

from subnet.compression import ErrorFeedback
from subnet.neuron.audit import FRESH, capture, state_digest
from subnet.scoring.audit import audit_draw, audited, first_failure, relative_error, replay_errors


def test_the_draw_selects_about_the_fraction_and_depends_on_every_field() -> None:
    hotkeys = [f"hk{i}" for i in range(4000)]
    picked = [h for h in hotkeys if audited("b1", "run", "grads", 3, h, 0.25)]
    assert 0.22 < len(picked) / len(hotkeys) < 0.28
    base = audit_draw("b1", "run", "grads", 3, "hk0")
    others = [audit_draw("b2", "run", "grads", 3, "hk0"), audit_draw("b1", "run2", "grads", 3, "hk0"),
              audit_draw("b1", "run", "other", 3, "hk0"), audit_draw("b1", "run", "grads", 4, "hk0"),
              audit_draw("b1", "run", "grads", 3, "hk1")]  # fmt: skip
    assert all(0.0 <= d < 1.0 for d in [base, *others]) and base not in others
    assert audit_draw("b1", "run", "grads", 3, "hk0") == base  # every validator draws the same


def test_no_beacon_or_no_fraction_audits_nothing() -> None:
    assert not audited(None, "run", "grads", 0, "hk", 1.0)
    assert not audited("b", "run", "grads", 0, "hk", 0.0)
    assert audited("b", "run", "grads", 0, "hk", 1.0)


def test_relative_error_known_answers() -> None:
    want = {"a": torch.tensor([3.0, 4.0])}  # norm 5
    assert relative_error({"a": torch.tensor([3.0, 4.0])}, want) == 0.0
    assert relative_error({"a": torch.tensor([3.0, 5.0])}, want) == pytest.approx(0.2)
    assert relative_error({"a": torch.tensor([6.0, 8.0])}, want) == pytest.approx(1.0)
    assert relative_error({"a": torch.zeros(2)}, {"a": torch.zeros(2)}) == 0.0
    assert relative_error({"a": torch.ones(2)}, {"a": torch.zeros(2)}) == math.inf
    assert relative_error({"b": torch.ones(2)}, want) == math.inf  # other names
    assert relative_error({"a": torch.ones(3)}, want) == math.inf  # other shape
    assert relative_error({"a": torch.tensor([3.0, math.nan])}, want) == math.inf


def test_the_update_is_judged_first_then_each_kept_part() -> None:
    same = {"x": torch.ones(4)}
    errors = replay_errors(same, same, {"ef": {"x": 2 * torch.ones(4)}}, {"ef": same})
    assert errors == {"update": 0.0, "ef": 1.0}
    assert first_failure(errors, 0.05) == ("ef", 1.0)
    assert first_failure({"update": 0.3, "ef": 1.0}, 0.05) == ("update", 0.3)
    assert first_failure({"update": math.nan}, 0.05) == (
        "update",
        pytest.approx(math.nan, nan_ok=True),
    )
    assert first_failure({"update": 0.01, "adamw": 0.04}, 0.05) is None


def test_a_state_digest_names_its_exact_bytes() -> None:
    ef = ErrorFeedback()
    assert state_digest(capture(None, ef)) == FRESH
    ef.buffers = {"w": torch.tensor([1.0, 2.0])}
    one = state_digest(capture(None, ef))
    assert one != FRESH and len(one) == 64
    assert state_digest(capture(None, ef)) == one
    ef.buffers = {"w": torch.tensor([1.0, 2.0000002])}  # one ulp off
    assert state_digest(capture(None, ef)) != one
    ef.buffers = {"v": torch.tensor([1.0, 2.0])}  # the same bytes under another name
    assert state_digest(capture(None, ef)) != one
