"""A validator's replay of one miner's window: the inner steps again, from the public model.

Since protocol v6 a miner starts every window with a fresh inner optimizer (warm-started from
the first gradient, ``subnet.training.inner.warm_start``), so its pseudo-gradient is a function
of public inputs alone: the model version, its assigned samples and the protocol's inner
settings. The replay computes that function; ``subnet.verify.check`` compares it with what the
miner sent, in the codec's input.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from ..training import build_inner_optimizer, pseudo_gradient, train_inner
from ..training.config import InnerConfig
from ..training.pseudograd import load_parameters


class ReplayShort(Exception):
    """The samples did not give the steps the upload claims (a receipt that lies about them)."""


@dataclass
class Replayer:
    """A scratch model and the inner settings a validator replays windows with."""

    model: nn.Module
    inner: InnerConfig

    def replay(
        self, base: dict[str, torch.Tensor], batches: Iterable, steps: int
    ) -> dict[str, torch.Tensor]:
        """The pseudo-gradient of ``steps`` inner steps from ``base`` on ``batches`` (CPU
        tensors). Raises :class:`ReplayShort` when the batches give fewer steps; any other
        exception (a data read, memory) is the replayer's own failure, not the sender's."""
        device = next(self.model.parameters()).device
        batches = list(batches)  # read first: a data failure is not the sender's
        load_parameters(self.model, base)
        cfg = self.inner.model_copy(update={"steps": steps})
        optimizer = build_inner_optimizer(self.model, cfg)
        done = train_inner(self.model, batches, cfg, optimizer)
        if done.steps != steps:
            raise ReplayShort(f"{done.steps} of {steps} steps fit the samples")
        delta = pseudo_gradient({k: v.to(device) for k, v in base.items()}, self.model)
        return {k: v.detach().cpu() for k, v in delta.items()}
