"""What the miner calls each window: the inner loop in this process, or as rank 0 of a launch.

Without torchrun (or with one rank) :meth:`Trainer.train` is :func:`train_inner`, optionally on a
``torch.compile``d model. Under torchrun it sends rank 0's job to every rank through the
:class:`~subnet.training.distributed.Group` that :func:`~subnet.training.distributed.launch`
joined (see that module for the protocol) and returns the same :class:`InnerResult`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from loguru import logger
from torch import nn

from subnet.training.config import InnerConfig
from subnet.training.distributed import Group, active, collective
from subnet.training.inner import Batch, InnerResult, train_inner
from subnet.training.parallel import ParallelConfig
from subnet.training.precision import bf16_native


class Trainer:
    """What the miner calls each window: ``train_inner`` alone, or as rank 0 of a launch."""

    def __init__(self, config: ParallelConfig | None = None, group: Group | None = None) -> None:
        self.config = config or ParallelConfig()
        self.group = group if group is not None else active()
        self._compiled: tuple[nn.Module, nn.Module] | None = None
        self._warned = False

    @property
    def world(self) -> int:
        """The ranks a window trains on (1 without a launch)."""
        return 1 if self.group is None else self.group.world

    def train(
        self,
        model: nn.Module,
        batches: Iterable[Batch],
        cfg: InnerConfig,
        optimizer: torch.optim.Optimizer,
    ) -> InnerResult:
        """Train ``model`` in place on ``batches``, like :func:`train_inner`, on every rank."""
        if cfg.bf16_autocast and not self._warned:
            self._warned = True
            device = next(model.parameters()).device
            if not bf16_native(device):
                logger.warning(
                    "bf16 autocast on {} without native bf16 matmuls: expect it to "
                    "run slower than fp32 (docs/benchmarks.md)",
                    device,
                )
        if self.group is None or self.group.world == 1:
            return train_inner(self._maybe_compiled(model), batches, cfg, optimizer)
        stacked = _stack(batches, cfg)
        world = self.group.world
        if stacked.shape[2] % world:
            raise ValueError(
                f"micro_batch {stacked.shape[2]} is not divisible by the "
                f"{world} training ranks; pick a multiple of {world}"
            )
        header = _header(model, optimizer, cfg, stacked)
        box = [header]
        collective(
            lambda: dist.broadcast_object_list(box, src=0, group=self.group.control), "a job"
        )
        return self.group.run_job(header, model, optimizer, stacked.to(self.group.device))

    def _maybe_compiled(self, model: nn.Module) -> nn.Module:
        if not self.config.compile:
            return model
        if self._compiled is None or self._compiled[0] is not model:
            self._compiled = (model, torch.compile(model))
        return self._compiled[1]


def _stack(batches: Iterable[Batch], cfg: InnerConfig) -> torch.Tensor:
    """The window's whole-step micro-batches as one [M, 2, B, T] tensor: inputs, then targets."""
    micro = []
    for inputs, targets in batches:
        micro.append(torch.stack([inputs, targets]))
        if len(micro) == cfg.steps * cfg.accumulation:
            break
    whole = len(micro) - len(micro) % cfg.accumulation
    if whole == 0:
        raise ValueError("no whole optimizer step of micro-batches to train on")
    if len({m.shape for m in micro[:whole]}) > 1:
        raise ValueError("micro-batches of different sizes cannot be split over ranks evenly")
    return torch.stack(micro[:whole]).long()


def _header(
    model: nn.Module, optimizer: torch.optim.Optimizer, cfg: InnerConfig, stacked: torch.Tensor
) -> dict:
    params = list(model.parameters())
    has_state = all("exp_avg" in optimizer.state.get(p, {}) for p in params)
    steps = [float(optimizer.state[p]["step"]) for p in params] if has_state else None
    return {
        "op": "train",
        "model": model.config.model_dump(),
        "inner": cfg.model_dump(),
        "shape": list(stacked.shape),
        "adam_steps": steps,
    }
