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
import sys
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
                # The mean over the whole tensor, as one process computes it, also when FSDP2
                # holds a shard of it: a validator replays in one process, bit for bit.
                whole = _full(p.grad).float().pow(2).mul_(factor) if _sharded(p.grad) else second
                second = second.clamp_min((whole.mean() * floor).item())
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
    averaged: bool = False,
) -> InnerResult:
    """Run up to ``cfg.steps`` optimizer steps on ``(inputs, targets)`` micro-batches.

    ``model(inputs, targets)`` must return ``(logits, loss)`` with ``loss`` the mean token loss.
    Each step consumes ``cfg.accumulation`` micro-batches; if ``batches`` runs out, training stops
    at the last whole step (a partial accumulation is dropped rather than applied at a different
    scale). Batches are moved to the model's device.

    ``averaged``: ``model`` averages its gradients over ranks in backward (a DDP or FSDP2 wrapper,
    :mod:`subnet.training.distributed`); each micro-batch's gradient is then computed from zero
    and added to the step's earlier ones (:func:`averaged_backward`), so DDP and FSDP2 agree.
    ``ranks`` > 1 computes each gradient as such a miner on that many ranks does (a validator's
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
            elif averaged:
                loss = averaged_backward(model, inputs, targets, cfg.accumulation, autocast)
            else:
                with autocast:
                    _, loss = model(inputs, targets)
                (loss / cfg.accumulation).backward()
            loss_sum += loss.detach().float()
            tokens += targets.numel()
        if cfg.grad_clip > 0:
            clip_gradients(list(model.parameters()), cfg.grad_clip)
        if steps == 0:
            warm_start(optimizer, cfg.moment_init, cfg.moment_floor)
        optimizer.step()
        steps += 1
    mean_loss = loss_sum.item() / (steps * cfg.accumulation) if steps else math.nan
    return InnerResult(tokens, steps, mean_loss, time.perf_counter() - start)


def clip_gradients(params: list[torch.Tensor], max_norm: float) -> None:
    """Scale the gradients so that their total 2-norm is at most ``max_norm``, in place.

    ``torch.nn.utils.clip_grad_norm_`` for plain tensors. FSDP2's gradients are shards
    (``DTensor``); their norms are taken over each whole gradient, one at a time, as one process
    takes them (a norm of shards rounds differently, and the steps after it amplify that), at the
    cost of one all-gather of the gradients per step.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not any(_sharded(g) for g in grads):
        nn.utils.clip_grad_norm_(params, max_norm)
        return
    # torch._foreach_norm on CPU is linalg.vector_norm per tensor (checked bitwise).
    norms = [torch.linalg.vector_norm(_full(g), 2.0) for g in grads]
    total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        (g.to_local() if _sharded(g) else g).mul_(coef)


def _sharded(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is an FSDP2 shard (a ``DTensor``); a process that never loaded
    ``torch.distributed.tensor`` (0.6 s to import) holds none."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor: gathered from the ranks for an FSDP2 shard, else itself."""
    return tensor.full_tensor() if _sharded(tensor) else tensor


def averaged_backward(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    accumulation: int,
    autocast: torch.autocast,
) -> torch.Tensor:
    """One micro-batch through a DDP or FSDP2 wrapper: its gradient from zero (the wrapper
    averages it over the ranks), then added to the step's earlier micro-batches. The loss."""
    params = [p for p in model.parameters() if p.requires_grad]
    held = [p.grad for p in params]
    for p in params:
        p.grad = None
    with autocast:
        _, loss = model(inputs, targets)
    (loss / accumulation).backward()
    for p, h in zip(params, held, strict=True):
        p.grad = _added(h, p.grad)
    return loss


def ranks_backward(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    accumulation: int,
    ranks: int,
    autocast: torch.autocast,
) -> torch.Tensor:
    """One micro-batch's gradients as ``ranks`` DDP or FSDP2 ranks compute them
    (:func:`averaged_backward`): rank ``r`` takes sequences ``r::ranks``; the ranks' gradients,
    each divided by ``ranks``, are added in rank order (for 2 ranks exactly gloo's average) and
    then to what the parameters hold. The mean of the ranks' losses."""
    params = [p for p in model.parameters() if p.requires_grad]
    held = [p.grad for p in params]  # earlier micro-batches of the step (None at its start)
    shares, losses = [], []
    for r in range(ranks):
        for p in params:
            p.grad = None
        with autocast:
            _, loss = model(inputs[r::ranks], targets[r::ranks])
        (loss / accumulation).backward()
        shares.append([p.grad for p in params])
        losses.append(loss.detach())
    for i, p in enumerate(params):
        parts = [share[i] / ranks for share in shares if share[i] is not None]
        total = parts[0] if parts else None
        for part in parts[1:]:
            total = total + part
        p.grad = _added(held[i], total)
    return torch.stack(losses).mean()


def _added(held: torch.Tensor | None, grad: torch.Tensor | None) -> torch.Tensor | None:
    """What autograd leaves in ``.grad`` after adding ``grad`` to ``held``."""
    if held is None or grad is None:
        return grad if held is None else held
    return held + grad
