"""The consensus screen: honest updates point along the others' mean, a poisoned one against."""

from __future__ import annotations

import math

import torch

from subnet.scoring.consensus import against, cosines


def _norm(d: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(t.pow(2).sum()) for t in d.values()))


def test_honest_updates_point_along_the_others_and_a_poisoned_one_against() -> None:
    g = torch.Generator().manual_seed(0)
    shared = {"w": torch.randn(64, 64, generator=g), "b": torch.randn(64, generator=g)}
    deltas = {
        f"h{i}": {k: v + 2.0 * torch.randn(v.shape, generator=g) for k, v in shared.items()}
        for i in range(8)
    }
    # honest work minus more than the generic direction: a poison pointing against the rest
    deltas["poison"] = {k: -0.5 * v + 2.0 * torch.randn(v.shape, generator=g)
                        for k, v in shared.items()}  # fmt: skip
    deltas["flip"] = {k: -v for k, v in deltas["h1"].items()}
    cos = cosines(deltas, {n: _norm(d) for n, d in deltas.items()})
    assert all(cos[f"h{i}"] > 0.1 for i in range(2, 8)), cos
    assert cos["flip"] < 0 and cos["poison"] < 0
    assert against(cos) == sorted(["flip", "poison"], key=lambda n: cos[n])
    # clipped as merged: a huge honest update is not pulled apart by its size
    deltas["big"] = {k: 50.0 * v for k, v in deltas["h2"].items()}
    cos = cosines(deltas, {n: _norm(d) for n, d in deltas.items()})
    assert cos["big"] > 0.1 and cos["h3"] > 0.1


def test_one_upload_has_nothing_to_compare_with() -> None:
    assert cosines({"a": {"w": torch.ones(3)}}, {"a": 3**0.5}) == {"a": 0.0}
