"""Model <-> state dict: the tied embedding appears once and round-trips bit for bit."""

from __future__ import annotations

import pytest
import torch

from subnet.model import build_model, weights_digest
from subnet.versions import load_state, model_state


def test_round_trip_into_another_model() -> None:
    source, target = build_model("tiny", seed=0), build_model("tiny", seed=1)
    state = model_state(source)
    assert all(t.dtype == torch.float32 and t.device.type == "cpu" for t in state.values())
    assert "tok_emb.weight" in state and not any("head" in name for name in state)
    assert weights_digest(source) != weights_digest(target)
    load_state(target, state)
    assert weights_digest(source) == weights_digest(target)
    x = torch.randint(0, source.config.vocab_size, (1, 8))
    assert torch.equal(source(x)[0], target(x)[0])  # the tied head follows the embedding


def test_state_is_a_copy() -> None:
    model = build_model("tiny", seed=0)
    state = model_state(model)
    state["tok_emb.weight"].add_(1.0)
    assert not torch.equal(state["tok_emb.weight"], model.tok_emb.weight.detach())


def test_mismatched_state_is_refused() -> None:
    model = build_model("tiny", seed=0)
    state = model_state(model)
    with pytest.raises(ValueError, match="names differ"):
        load_state(model, {k: v for k, v in state.items() if k != "norm.weight"})
    state["norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match="shape"):
        load_state(model, state)
