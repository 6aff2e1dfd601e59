"""A validator's replay of one miner's window: the inner steps again, from the public model.

Since protocol v6 a miner starts every window with a fresh inner optimizer (warm-started from
the first gradient, ``subnet.training.inner.warm_start``), so its pseudo-gradient is a function
of public inputs alone: the model version, its assigned samples and the protocol's inner
settings. The replay computes that function; ``subnet.verify.check`` compares it with what the
miner sent, in the codec's input.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from ..training import build_inner_optimizer, pseudo_gradient, train_inner
from ..training.config import InnerConfig
from ..training.pseudograd import load_parameters

PROBE_NOISE = 1e-6  # relative gradient noise of the chaos probe: about what other kernels differ by


class ReplayShort(Exception):
    """The samples did not give the steps the upload claims (a receipt that lies about them)."""


@dataclass
class Replayer:
    """A scratch model and the inner settings a validator replays windows with."""

    model: nn.Module
    inner: InnerConfig

    def replay(
        self,
        base: dict[str, torch.Tensor],
        batches: Iterable,
        steps: int,
        noise: float = 0.0,
        threads: int | None = None,
        ranks: int = 1,
        bf16: bool | None = None,
    ) -> dict[str, torch.Tensor]:
        """The pseudo-gradient of ``steps`` inner steps from ``base`` on ``batches`` (CPU
        tensors). Raises :class:`ReplayShort` when the batches give fewer steps; any other
        exception (a data read, memory) is the replayer's own failure, not the sender's.

        ``noise`` > 0 multiplies every gradient by ``1 + noise * N(0, 1)`` (seeded): the chaos
        probe, a replay as another machine's kernels might compute it. ``threads``: the CPU
        threads to replay with (the miner's, from its signed metadata: with the kernels
        ``subnet.kernels`` pins, a replay on as many threads is the miner's training bit for
        bit); None: this process's. ``ranks``: the miner's training ranks, whose gradients
        the replay computes and averages as DDP does (``train_inner``). ``bf16``: forward
        passes under bf16 autocast or not, as the upload's replay class says (None: the
        inner settings')."""
        device = next(self.model.parameters()).device
        batches = list(batches)  # read first: a data failure is not the sender's
        with _threads(threads if device.type == "cpu" else None):
            return self._replay(base, batches, steps, noise, ranks, bf16)

    def _replay(
        self,
        base: dict[str, torch.Tensor],
        batches: list,
        steps: int,
        noise: float,
        ranks: int,
        bf16: bool | None,
    ) -> dict[str, torch.Tensor]:
        device = next(self.model.parameters()).device
        load_parameters(self.model, base)
        update: dict = {"steps": steps}
        if bf16 is not None:
            update["bf16_autocast"] = bf16
        cfg = self.inner.model_copy(update=update)
        optimizer = build_inner_optimizer(self.model, cfg)
        hooks = _perturb(self.model, noise) if noise > 0 else []
        try:
            done = train_inner(self.model, batches, cfg, optimizer, ranks)
        finally:
            for hook in hooks:
                hook.remove()
        if done.steps != steps:
            raise ReplayShort(f"{done.steps} of {steps} steps fit the samples")
        delta = pseudo_gradient({k: v.to(device) for k, v in base.items()}, self.model)
        return {k: v.detach().cpu() for k, v in delta.items()}


@contextlib.contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """Torch's CPU threads set to ``count`` inside, and back afterwards (None: unchanged)."""
    own = torch.get_num_threads()
    if count is None or count == own:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(own)


def _perturb(model: nn.Module, noise: float) -> list:
    """Gradient hooks that perturb each gradient by ``noise`` relative (seeded, reproducible)."""
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(0)

    def hook(grad: torch.Tensor) -> torch.Tensor:
        jitter = torch.randn(grad.shape, generator=generator, device=grad.device, dtype=grad.dtype)
        return grad * (1 + noise * jitter)

    return [p.register_hook(hook) for p in model.parameters() if p.requires_grad]
