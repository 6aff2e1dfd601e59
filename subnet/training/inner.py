"""The inner loop, written once: H AdamW steps with accumulation, clipping and optional bf16.

Every mode runs this same function: a miner's local phase, a DiLoCo worker in a room, the
simulated workers of ``scripts/bench.py convergence`` and Beam's side of the throughput benchmark.
DiLoCo (Douillard et al., 2023) keeps each worker's AdamW state across rounds, so the optimizer is
passed in and outlives the call. Beam's miners start a fresh optimizer every round instead (so a
round's training depends on public inputs only, and a validator can replay it), warm-started by
:func:`warm_start`: with zero moments AdamW's first steps move every coordinate by about ``lr``,
whatever its gradient; starting the second moment at ``moment_init`` times the first squared
gradient damps those steps per coordinate. Measured in ``bench.py convergence`` (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from subnet.training.config import InnerConfig

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class InnerResult:
    """What one call to :func:`train_inner` did: tokens seen, steps taken, mean loss, wall time."""

    tokens: int
    steps: int
    mean_loss: float
    seconds: float


def build_inner_optimizer(model: nn.Module, cfg: InnerConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only; norms and biases are not decayed (as in GPT-2)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)


@torch.no_grad()
def warm_start(optimizer: torch.optim.Optimizer, factor: float, floor: float = 0.0) -> None:
    """Set a fresh AdamW's state before its first step: first moment zero, second moment
    ``factor * grad**2`` (the gradients just computed), raised to at least ``floor`` times its
    tensor's mean where ``floor > 0``, step count zero.

    A no-op for an optimizer that already holds state (one kept across rounds), for one that is
    not Adam(W), or for ``factor == 0``. Deterministic in the gradients, so a replay of the same
    steps agrees.
    """
    adam = isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW)
    if factor <= 0 or optimizer.state or not adam:
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            second = p.grad.detach().float().pow(2).mul_(factor)
            if floor > 0:
                second = torch.maximum(second, second.mean() * floor)
            optimizer.state[p] = {
                "step": torch.tensor(0.0, dtype=torch.float32),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": second.to(p.dtype),
            }


def train_inner(
    model: nn.Module,
    batches: Iterable[Batch],
    cfg: InnerConfig,
    optimizer: torch.optim.Optimizer | None = None,
    ranks: int = 1,
) -> InnerResult:
    """Run up to ``cfg.steps`` optimizer steps on ``(inputs, targets)`` micro-batches.

    ``model(inputs, targets)`` must return ``(logits, loss)`` with ``loss`` the mean token loss.
    Each step consumes ``cfg.accumulation`` micro-batches; if ``batches`` runs out, training stops
    at the last whole step (a partial accumulation is dropped rather than applied at a different
    scale). Batches are moved to the model's device.

    ``ranks`` > 1 computes each gradient as a DDP miner on that many ranks does (a validator's
    replay of one, :func:`ranks_backward`), in one process.
    """
    optimizer = optimizer if optimizer is not None else build_inner_optimizer(model, cfg)
    device = next(model.parameters()).device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16_autocast)
    stream = iter(batches)
    # Summed on the device so the loop never forces a host sync per step.
    loss_sum = torch.zeros((), device=device)
    tokens = steps = 0
    model.train()
    start = time.perf_counter()
    for _ in range(cfg.steps):
        micro = list(itertools.islice(stream, cfg.accumulation))
        if len(micro) < cfg.accumulation:
            break
        optimizer.zero_grad(set_to_none=True)
        for inputs, targets in micro:
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            if ranks > 1:
                loss = ranks_backward(model, inputs, targets, cfg.accumulation, ranks, autocast)
            else:
                with autocast:
                    _, loss = model(inputs, targets)
                (loss / cfg.accumulation).backward()
            loss_sum += loss.detach().float()
            tokens += targets.numel()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        if steps == 0:
            warm_start(optimizer, cfg.moment_init, cfg.moment_floor)
        optimizer.step()
        steps += 1
    mean_loss = loss_sum.item() / (steps * cfg.accumulation) if steps else math.nan
    return InnerResult(tokens, steps, mean_loss, time.perf_counter() - start)


def ranks_backward(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    accumulation: int,
    ranks: int,
    autocast: torch.autocast,
) -> torch.Tensor:
    """One micro-batch's gradients as ``ranks`` DDP ranks compute them (``subnet.training.
    distributed``): rank ``r`` takes sequences ``r::ranks``, adds its gradient to what the
    parameters hold, and DDP averages the ranks' sums (each divided by ``ranks``, then added in
    rank order: for 2 ranks exactly gloo's result). The mean of the ranks' losses."""
    params = [p for p in model.parameters() if p.requires_grad]
    held = [p.grad for p in params]  # earlier micro-batches of the step (None at its start)
    shares, losses = [], []
    for r in range(ranks):
        for p in params:
            p.grad = None
        with autocast:
            _, loss = model(inputs[r::ranks], targets[r::ranks])
        (loss / accumulation).backward()
        shares.append([_added(h, p.grad) for p, h in zip(params, held, strict=True)])
        losses.append(loss.detach())
    for i, p in enumerate(params):
        parts = [share[i] / ranks for share in shares if share[i] is not None]
        total = parts[0] if parts else None
        for part in parts[1:]:
            total = total + part
        p.grad = total
    return torch.stack(losses).mean()


def _added(held: torch.Tensor | None, grad: torch.Tensor | None) -> torch.Tensor | None:
    """What autograd leaves in ``.grad`` after adding ``grad`` to ``held``."""
    if held is None or grad is None:
        return grad if held is None else held
    return held + grad
