"""Dense codecs: every value sent, in fp32 (exact) or bf16 (rounded, half the bytes).

The fp32 codec is the baseline every ratio in ``docs/benchmarks.md`` is measured against and the
exchange format of plain DiLoCo (Douillard et al., 2023, "DiLoCo: Distributed Low-Communication
Training of Language Models").
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from subnet.compression.base import Compressor, CompressorInfo, PartSpec


class DenseCompressor(Compressor):
    """Send every value, cast to ``dtype``; decoding casts back to fp32.

    bf16 keeps fp32's exponent range and 8 significant bits, so the round trip has relative error
    at most 2**-8 per value (round to nearest even), with no overflow for any finite fp32 value.
    """

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"DenseCompressor supports float32 and bfloat16, not {dtype}")
        self.dtype = dtype
        exact = dtype == torch.float32
        name = "dense-fp32" if exact else "dense-bf16"
        self.info = CompressorInfo(
            name,
            lossless=exact,
            summary=f"every value as {dtype}",
            check="lossless" if exact else "other",
        )

    def encode_tensor(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """One part, ``v``: the flattened tensor in the wire dtype (a copy, never a view)."""
        return {"v": tensor.reshape(-1).to(self.dtype, copy=True)}

    def part_specs(self, shape: tuple[int, ...]) -> dict[str, PartSpec]:
        """``v`` holds ``prod(shape)`` values of the wire dtype."""
        return {"v": PartSpec(self.dtype, math.prod(shape))}

    def decode_tensor(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> torch.Tensor:
        """Cast back to fp32 (a copy, so the result never aliases the payload) and reshape."""
        return parts["v"].to(torch.float32, copy=True).reshape(shape)
