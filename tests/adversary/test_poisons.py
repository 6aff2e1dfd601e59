"""Known answers for the poisoning attackers' biases (so the benchmark measures what it says)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks import poisons  # noqa: E402


def _norm(d: dict[str, torch.Tensor]) -> float:
    return float(torch.sqrt(sum((v.float() ** 2).sum() for v in d.values())))


DELTA = {"w": torch.tensor([3.0, 0.0, 4.0, 0.0])}  # |delta| = 5, support {0, 2}
GENERIC = {"w": torch.tensor([1.0, 1.0, 1.0, 1.0])}  # |generic| = 2, 1.41 on the support


def test_anti_generic_scales_by_the_full_norm_and_keeps_the_support() -> None:
    out = poisons.anti_generic(DELTA, GENERIC, 0.5)  # c = 0.5 * 5 / 2 = 1.25
    assert out["w"].tolist() == pytest.approx([1.75, 0.0, 2.75, 0.0])


def test_on_support_bias_has_the_asked_norm() -> None:
    out = poisons.on_support(DELTA, GENERIC, 0.5)
    bias = {"w": DELTA["w"] - out["w"]}
    assert _norm(bias) == pytest.approx(2.5) and out["w"][1] == 0 and out["w"][3] == 0


def test_orthogonal_bias_is_orthogonal_to_the_update_and_ascends() -> None:
    out = poisons.orthogonal(DELTA, GENERIC, 0.5)
    bias = out["w"] - DELTA["w"]
    assert float((bias * DELTA["w"]).sum()) == pytest.approx(0.0, abs=1e-5)
    assert float(bias.norm()) == pytest.approx(2.5)
    # -(masked generic) minus its part along delta: (-1, 0, -1, 0) + 0.28 (3, 0, 4, 0) ∝ (-4, 0, 3, 0)
    assert (bias / bias.norm()).tolist() == pytest.approx([-0.8, 0.0, 0.6, 0.0], abs=1e-5)


def test_hug_cancels_the_asked_fraction_of_a_linear_gain() -> None:
    # gain(update) = <update, (1, 1, 1, 1)> / 7: 1 for delta; each unit of c removes 2/7.
    def gain(update):
        return float(update["w"].sum()) / 7.0

    out = poisons.hug(DELTA, GENERIC, gain, fraction=0.25, steps=30)
    assert gain(out) == pytest.approx(0.75, abs=1e-4)
    assert out["w"][1] == 0 and out["w"][3] == 0
