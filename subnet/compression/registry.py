"""The compressor registry: a plain dict from name to builder, checked for completeness by a test."""

from __future__ import annotations

from collections.abc import Callable

import torch

from subnet.compression.base import Compressor, Payload, RejectReason, Shapes
from subnet.compression.config import CompressionConfig
from subnet.compression.dense import DenseCompressor
from subnet.compression.int8 import Int8Compressor
from subnet.compression.sparse_global import SparseGlobalRiceCompressor
from subnet.compression.sparseloco import SparseLoCoCompressor
from subnet.compression.sparseloco_rice import SparseLoCoRiceCompressor

COMPRESSORS: dict[str, Callable[[CompressionConfig], Compressor]] = {
    "dense-fp32": lambda cfg: DenseCompressor(torch.float32),
    "dense-bf16": lambda cfg: DenseCompressor(torch.bfloat16),
    "int8": lambda cfg: Int8Compressor(cfg.int8_block),
    "sparseloco": lambda cfg: SparseLoCoCompressor(cfg.topk, cfg.chunk),
    "sparseloco-rice": lambda cfg: SparseLoCoRiceCompressor(cfg.topk, cfg.chunk),
    "sparse-global-rice": lambda cfg: SparseGlobalRiceCompressor(cfg.topk, cfg.chunk),
}


def build_compressor(cfg: CompressionConfig) -> Compressor:
    """The compressor ``cfg`` names, built with ``cfg``'s parameters."""
    return COMPRESSORS[cfg.name](cfg)


def validate_payload(
    payload: Payload, shapes: Shapes, cfg: CompressionConfig
) -> RejectReason | None:
    """Why ``payload`` is not a valid ``cfg`` encoding of tensors of ``shapes``; ``None`` if it is.

    The wire reader calls this after the signature and header checks and before decoding: it
    checks keys, dtypes, lengths, index ranges and order, and finiteness.
    """
    return build_compressor(cfg).validate(payload, shapes)
