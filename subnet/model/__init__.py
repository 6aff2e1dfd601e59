"""The decoder language model and its presets.

Public API:

- `ModelConfig`: frozen pydantic architecture config (vocab_size, d_model, n_layers, n_heads, d_ff,
  context_len, rope_theta, norm_eps, init_std, bf16); `ModelConfig.num_params()` counts exactly.
- `PRESETS`: ``{"tiny", "small", "hypertrain-20m"} -> ModelConfig``.
- `build_model(config_or_name, *, vocab_size=None, seed=0, device="cpu") -> Decoder`: seeded,
  bit-reproducible construction.
- `Decoder.forward(idx [B, T], targets [B, T] | None) -> (logits [B, T, V], loss | None)`.
- `evaluate_loss(model, batches) -> float`: token-weighted mean cross-entropy, no grad.
- `weights_digest(model) -> str`: sha256 of the state_dict; `num_params(model) -> int`.
"""

from subnet.model.build import build_model, evaluate_loss, init_weights, num_params, weights_digest
from subnet.model.config import PRESETS, ModelConfig, resolve_config
from subnet.model.decoder import Decoder

__all__ = [
    "PRESETS",
    "Decoder",
    "ModelConfig",
    "build_model",
    "evaluate_loss",
    "init_weights",
    "num_params",
    "resolve_config",
    "weights_digest",
]
