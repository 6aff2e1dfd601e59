"""Typed settings for pseudo-gradient compression (part of the network-wide protocol config)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CompressorName = Literal[
    "dense-fp32", "dense-bf16", "int8", "sparseloco", "sparseloco-rice", "sparse-global-rice"
]


class CompressionConfig(BaseModel):
    """Which compressor every miner uses, and its parameters.

    Each compressor reads only its own fields: ``int8`` reads ``int8_block``; ``sparseloco`` and
    ``sparseloco-rice`` read ``topk`` and ``chunk``. ``ef_decay`` is the sender's error-feedback decay (SparseLoCo's beta,
    Sarfi et al., 2025); it applies to any lossy compressor and is inert for lossless ones.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: CompressorName = Field(
        "sparseloco-rice",
        description="pseudo-gradient codec: sparseloco-rice, sparseloco, int8, dense-bf16, dense-fp32",
    )
    topk: int = Field(
        64, ge=1, description="values kept per full chunk (sparseloco, sparseloco-rice)"
    )
    chunk: int = Field(
        64, ge=2, le=64, description="block side; a chunk holds chunk*chunk values (<= 4096)"
    )
    ef_decay: float = Field(0.95, ge=0.0, le=1.0, description="error-feedback decay beta")
    int8_block: int = Field(256, ge=1, description="values per absmax scale (int8)")
