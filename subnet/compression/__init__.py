"""Pseudo-gradient compression (dense, int8, SparseLoCo) and the lossless model-patch codec.

Everything here is pure tensor code with no I/O: compressors turn named fp32 tensors into a flat
tensor dict (a safetensors payload for the wire layer) and back; see ``docs/compression.md``.

The names below are loaded on first use (``subnet.lazy``): importing the package, or its
config module alone, imports no torch.
"""

from subnet.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "base": [
            "Compressor",
            "CompressorInfo",
            "Payload",
            "PayloadError",
            "RejectReason",
            "payload_nbytes",
        ],
        "config": ["CompressionConfig"],
        "error_feedback": ["ErrorFeedback"],
        "patch": ["PatchError", "apply_patch", "encode_patch", "state_digest"],
        "registry": ["COMPRESSORS", "build_compressor", "validate_payload"],
    },
)
