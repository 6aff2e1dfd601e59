"""How one training job is spread over the ranks: DDP (replicated) or FSDP2 (sharded).

Both engines start from the same thing, a plain model and AdamW on every rank holding rank 0's
values, and end with rank 0's plain model and AdamW holding the result, so the miner's
pseudo-gradient, error feedback and saved state never see a wrapper.

- ``ddp``: ``DistributedDataParallel`` around the plain model; gradients are all-reduced
  (averaged) during backward and every rank steps the same AdamW.
- ``fsdp``: a copy of the model with every block and the root passed to FSDP2's ``fully_shard``;
  parameters, gradients and AdamW moments are sharded across ranks during the inner steps and
  gathered back into the plain model and optimizer at the end. Each rank still receives the full
  model at the start of a job (76 MB for ``hypertrain-20m``), so FSDP2 saves gradient and
  optimizer memory, not the one full copy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from subnet.training.config import InnerConfig
from subnet.training.config import ParallelConfig as ParallelConfig  # re-exported: it lived here
from subnet.training.inner import build_inner_optimizer


@dataclass
class Engine:
    """The module and optimizer one job trains, and how its result returns to the plain model."""

    module: nn.Module
    optimizer: torch.optim.Optimizer
    sharded: bool

    def finish(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Copy the trained values back into ``model`` and ``optimizer`` (FSDP2 only gathers)."""
        if not self.sharded:
            return
        with torch.no_grad():
            pairs = zip(model.parameters(), self.module.parameters(), strict=True)
            for plain, shard in pairs:
                plain.copy_(shard.full_tensor())
                state = self.optimizer.state.get(shard, {})
                if "exp_avg" in state:
                    optimizer.state[plain] = {
                        "step": state["step"].detach().clone(),
                        "exp_avg": state["exp_avg"].full_tensor(),
                        "exp_avg_sq": state["exp_avg_sq"].full_tensor(),
                    }


class _DDPCache:
    """One DDP wrapper per plain model: re-wrapping would stack a second reducer's hooks."""

    wrapped: dict[int, nn.Module] = {}


def build_engine(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    cfg: InnerConfig,
    mode: str,
    device: str,
    group: object,
) -> Engine:
    """Wrap ``model`` (holding rank 0's values on every rank) for one job in ``mode``."""
    if mode == "ddp":
        key = id(model)
        if key not in _DDPCache.wrapped or _DDPCache.wrapped[key].module is not model:
            ids = [torch.device(device).index] if device.startswith("cuda") else None
            # RoPE tables are derived from the config: nothing to broadcast each forward.
            _DDPCache.wrapped[key] = nn.parallel.DistributedDataParallel(
                model, device_ids=ids, process_group=group, forward_sync_buffers=False
            )
        return Engine(_DDPCache.wrapped[key], optimizer, sharded=False)
    return _fsdp_engine(model, optimizer, cfg, group)


def _fsdp_engine(
    model: nn.Module, optimizer: torch.optim.Optimizer, cfg: InnerConfig, group: object
) -> Engine:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import distribute_tensor

    shard = copy.deepcopy(model)
    device_type = next(model.parameters()).device.type
    mesh = DeviceMesh.from_group(group, device_type)
    for block in getattr(shard, "blocks", []):
        fully_shard(block, mesh=mesh)
    fully_shard(shard, mesh=mesh)
    sharded_opt = build_inner_optimizer(shard, cfg)
    for plain, p in zip(model.parameters(), shard.parameters(), strict=True):
        state = optimizer.state.get(plain, {})
        if "exp_avg" not in state:
            continue
        # Every rank holds the full moments already, so each keeps its slice (no scatter).
        sharded_opt.state[p] = {
            "step": state["step"].detach().clone(),
            "exp_avg": distribute_tensor(state["exp_avg"], mesh, p.placements, src_data_rank=None),
            "exp_avg_sq": distribute_tensor(
                state["exp_avg_sq"], mesh, p.placements, src_data_rank=None
            ),
        }
    return Engine(shard, sharded_opt, sharded=True)
