"""Between a torch model and the plain state dict that versions are published and synced as.

The decoder's LM head is tied to the token embedding through `F.linear`, so `state_dict()` holds
the matrix once (`tok_emb.weight`) and a state dict round-trips without any tie bookkeeping.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn


def snapshot(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Detached, contiguous CPU copies of `state`, safe to keep while the source keeps training."""
    return {name: t.detach().to("cpu", copy=True).contiguous() for name, t in state.items()}


def model_state(model: nn.Module) -> dict[str, Tensor]:
    """The model's persistent state as fp32 CPU tensors (what the holder publishes)."""
    return {
        name: t.detach().to("cpu", torch.float32, copy=True).contiguous()
        for name, t in model.state_dict().items()
    }


def load_state(model: nn.Module, state: Mapping[str, Tensor]) -> None:
    """Copy `state` into `model` in place, keeping its device and dtypes.

    Raises:
        ValueError: names or shapes differ from the model's state dict.
    """
    own = model.state_dict()
    if set(own) != set(state):
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        raise ValueError(f"state names differ: missing {missing[:5]}, unexpected {extra[:5]}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(own[name].shape):
            raise ValueError(f"{name}: shape {tuple(tensor.shape)}, model has {own[name].shape}")
    with torch.no_grad():
        for name, tensor in state.items():
            own[name].copy_(tensor)
