"""Seeded model construction, weight digests and loss evaluation.

Every peer builds the starting model with `build_model(name, seed=protocol_seed)` and must get the
same bits, so initialisation draws from a private CPU generator in a fixed parameter order and never
touches the global RNG or the target device's RNG (CUDA kernels draw differently from CPU ones).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

from subnet.model.config import ModelConfig, resolve_config
from subnet.model.decoder import Decoder

# Output projections write into the residual stream once per block; scaling their init by
# 1/sqrt(2 * n_layers) keeps the residual variance flat with depth (GPT-2).
_RESIDUAL_PROJECTIONS = ("attn.proj.weight", "mlp.down.weight")


def init_weights(model: Decoder, seed: int) -> None:
    """Initialise `model` in place, deterministically from `seed`, on any device.

    Matrices ~ N(0, init_std^2) (residual output projections scaled down by depth); RMSNorm
    weights = 1.
    """
    config = model.config
    generator = torch.Generator(device="cpu").manual_seed(seed)
    residual_std = config.init_std / math.sqrt(2 * config.n_layers)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.fill_(1.0)
                continue
            std = residual_std if name.endswith(_RESIDUAL_PROJECTIONS) else config.init_std
            values = torch.empty(param.shape, dtype=torch.float32).normal_(
                0.0, std, generator=generator
            )
            param.copy_(values)


def build_model(
    config_or_name: ModelConfig | str,
    *,
    vocab_size: int | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> Decoder:
    """Build a seeded `Decoder` from a config or a preset name ("tiny", "small", "hypertrain-20m").

    Args:
        config_or_name: a `ModelConfig` or a key of `PRESETS`.
        vocab_size: overrides the config's vocabulary (e.g. a CPU preset on a smaller tokenizer).
        seed: initialisation seed; same config and seed give bit-identical weights everywhere.
        device: where the returned model lives; initialisation always happens on the CPU.
    """
    config = resolve_config(config_or_name, vocab_size)
    model = Decoder(config)
    init_weights(model, seed)
    return model.to(device)


def num_params(model: nn.Module) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def weights_digest(model: nn.Module) -> str:
    """sha256 hex digest of the state_dict: names, dtypes, shapes and raw bytes, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


@torch.no_grad()
def evaluate_loss(model: Decoder, batches: Iterable[tuple[Tensor, Tensor]]) -> float:
    """Mean next-token cross-entropy over `batches` of (x, y) [B, T], weighted by token count.

    Runs in eval mode without gradients and restores the previous mode. Batches are moved to the
    model's device.

    Raises:
        ValueError: `batches` is empty.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for x, y in batches:
            _, loss = model(x.to(device), y.to(device))
            assert loss is not None
            total += loss.item() * y.numel()
            tokens += y.numel()
    finally:
        model.train(was_training)
    if tokens == 0:
        raise ValueError("evaluate_loss got no batches")
    return total / tokens
