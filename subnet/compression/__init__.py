"""Pseudo-gradient compression (dense, int8, SparseLoCo) and the lossless model-patch codec.

Everything here is pure tensor code with no I/O: compressors turn named fp32 tensors into a flat
tensor dict (a safetensors payload for the wire layer) and back; see ``docs/compression.md``.
"""

from subnet.compression.base import (
    Compressor,
    CompressorInfo,
    Payload,
    PayloadError,
    RejectReason,
    payload_nbytes,
)
from subnet.compression.config import CompressionConfig
from subnet.compression.error_feedback import ErrorFeedback
from subnet.compression.patch import PatchError, apply_patch, encode_patch, state_digest
from subnet.compression.registry import COMPRESSORS, build_compressor, validate_payload

__all__ = [
    "COMPRESSORS",
    "CompressionConfig",
    "Compressor",
    "CompressorInfo",
    "ErrorFeedback",
    "PatchError",
    "Payload",
    "PayloadError",
    "RejectReason",
    "apply_patch",
    "build_compressor",
    "encode_patch",
    "payload_nbytes",
    "state_digest",
    "validate_payload",
]
