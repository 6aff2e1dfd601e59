"""Blockwise absmax int8: one fp32 scale per block of values, values rounded to [-127, 127].

The scheme of bitsandbytes-style blockwise quantization (Dettmers et al., 2022, "8-bit Optimizers
via Block-wise Quantization"): small blocks keep one outlier from flattening the resolution of the
whole tensor. About 3.9x smaller than fp32 at the default block of 256.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F

from subnet.compression.base import Compressor, CompressorInfo, PartSpec, RejectReason
from subnet.wire.reasons import Reason


class Int8Compressor(Compressor):
    """Quantize each block of ``block`` values to int8 against its own absmax.

    Error bound: every decoded value is within ``absmax(block) / 254`` of the original (half a
    quantization step), and values equal to the block's absmax are exact up to fp32 rounding.
    """

    def __init__(self, block: int = 256) -> None:
        self.block = block
        self.info = CompressorInfo(
            "int8", lossless=False, summary=f"absmax int8, block {block}", check="other"
        )

    def _blocks(self, numel: int) -> int:
        return max(1, math.ceil(numel / self.block))

    def encode_tensor(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """Parts: ``q`` (int8 per value) and ``scale`` (fp32 per block, absmax / 127)."""
        flat = tensor.reshape(-1)
        numel = flat.numel()
        padded = F.pad(flat, (0, self._blocks(numel) * self.block - numel)).view(-1, self.block)
        scale = padded.abs().amax(dim=1) / 127.0
        # An all-zero block would divide by zero; any positive scale encodes zeros exactly.
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(padded / safe[:, None]).clamp_(-127, 127).to(torch.int8)
        return {"q": q.reshape(-1)[:numel], "scale": scale}

    def part_specs(self, shape: tuple[int, ...]) -> dict[str, PartSpec]:
        """``q`` has one int8 per value, ``scale`` one fp32 per block."""
        numel = math.prod(shape)
        return {
            "q": PartSpec(torch.int8, numel),
            "scale": PartSpec(torch.float32, self._blocks(numel)),
        }

    def check_parts(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> RejectReason | None:
        """Scales must be finite and non-negative (an honest encoder never writes a negative one)."""
        scale = parts["scale"]
        if not bool(torch.isfinite(scale).all()):
            return Reason.NON_FINITE
        if bool((scale < 0).any()):
            return Reason.INVALID_VALUE
        return None

    def decode_tensor(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> torch.Tensor:
        """``q * scale`` per block, back to ``shape``."""
        q, scale = parts["q"], parts["scale"]
        numel = q.numel()
        padded = F.pad(q.float(), (0, scale.numel() * self.block - numel)).view(-1, self.block)
        return (padded * scale[:, None]).reshape(-1)[:numel].reshape(shape)
