"""Version fixtures: a holder key, a history of tiny-model states, and a store of v0..v6."""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair
from torch import Tensor
from versions_support import VERSIONS, publish_all

from subnet.model import build_model
from subnet.storage import MemoryStore
from subnet.versions import model_state


@pytest.fixture(scope="session")
def holder() -> Keypair:
    """The model holder's hotkey."""
    return Keypair.create_from_seed(bytes(range(32)))


@pytest.fixture(scope="session")
def stranger() -> Keypair:
    """Some other hotkey."""
    return Keypair.create_from_uri("//Eve")


@pytest.fixture(scope="session")
def history() -> list[dict[str, Tensor]]:
    """States of a tiny model, v0 .. v6: each version moves half the tensors (an outer step)."""
    state = model_state(build_model("tiny", seed=0))
    generator = torch.Generator().manual_seed(1)
    states = [state]
    for version in range(1, VERSIONS):
        state = {k: v.clone() for k, v in state.items()}
        for i, name in enumerate(sorted(state)):
            if (i + version) % 2 == 0:
                step = torch.randn(state[name].shape, generator=generator)
                state[name] += 1e-3 * step
        states.append(state)
    return states


@pytest.fixture
def published(holder: Keypair, history: list[dict[str, Tensor]]) -> MemoryStore:
    """A store holding v0 .. v6 with checkpoints at 0, 3 and 6."""
    store = MemoryStore("versions")
    publish_all(store, holder, history, VERSIONS - 1)
    return store
