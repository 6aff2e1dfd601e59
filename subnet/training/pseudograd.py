"""Pseudo-gradients: how far a worker's parameters moved during its inner phase.

DiLoCo (Douillard et al., 2023) treats ``start - end`` as a gradient for the outer optimizer, so a
positive outer learning rate moves the global model the way the worker went.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """Detached fp32 copies of the model's parameters (tied weights appear once)."""
    return {name: p.detach().float().clone() for name, p in model.named_parameters()}


def pseudo_gradient(start: Mapping[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """``start - current`` for every parameter, in fp32 on the parameters' device."""
    return {name: start[name] - p.detach().float() for name, p in model.named_parameters()}


@torch.no_grad()
def load_parameters(model: nn.Module, params: Mapping[str, torch.Tensor]) -> None:
    """Copy ``params`` into the model's parameters in place (optimizer references stay valid)."""
    for name, p in model.named_parameters():
        p.copy_(params[name])
