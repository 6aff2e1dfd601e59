"""Model configuration and the named presets.

A `ModelConfig` fully determines the decoder's architecture, so it is part of the protocol: every
peer that builds the model from the same config and seed gets bit-identical weights.

Presets:

- ``tiny``: a few hundred thousand parameters; unit tests and smoke runs.
- ``small``: about 6 M parameters with an 8,192-token vocabulary; CPU demos and benchmarks.
- ``hypertrain-20m``: the network model from DESIGN §7 (19,094,784 parameters).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator


class ModelConfig(BaseModel):
    """Architecture of the decoder-only transformer (see `subnet.model.decoder.Decoder`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    context_len: int
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02
    bf16: bool = False
    """Run forward under bf16 autocast (the loss is still computed in fp32)."""

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {self.head_dim}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "context_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        return self

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    def num_params(self) -> int:
        """Exact parameter count, computed without building the model.

        The LM head is tied to the embedding, so the vocabulary is counted once; there are no biases.
        """
        attention = 4 * self.d_model * self.d_model  # q, k, v and output projections
        swiglu = 3 * self.d_model * self.d_ff  # gate, up, down
        norms = 2 * self.d_model  # pre-attention and pre-MLP RMSNorm weights
        block = attention + swiglu + norms
        return self.vocab_size * self.d_model + self.n_layers * block + self.d_model


PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(
        vocab_size=512, d_model=64, n_layers=2, n_heads=2, d_ff=256, context_len=128
    ),
    "small": ModelConfig(
        vocab_size=8192, d_model=256, n_layers=4, n_heads=4, d_ff=1024, context_len=512
    ),
    "hypertrain-20m": ModelConfig(
        vocab_size=50_000, d_model=256, n_layers=6, n_heads=4, d_ff=1024, context_len=2048
    ),
}
"""Named model configurations; a test checks every entry builds and runs."""


def resolve_config(config_or_name: ModelConfig | str, vocab_size: int | None = None) -> ModelConfig:
    """Return the config for a preset name (or the config itself), with an optional vocab override.

    Raises:
        KeyError: the name is not a preset; the message lists the presets.
    """
    if isinstance(config_or_name, str):
        if config_or_name not in PRESETS:
            raise KeyError(
                f"unknown model preset {config_or_name!r}; choose from {sorted(PRESETS)}"
            )
        config = PRESETS[config_or_name]
    else:
        config = config_or_name
    if vocab_size is not None and vocab_size != config.vocab_size:
        config = ModelConfig(**{**config.model_dump(), "vocab_size": vocab_size})
    return config
