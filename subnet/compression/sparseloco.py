"""SparseLoCo: chunked top-k, 2-bit values, 12-bit indices (Sarfi et al., 2025).

"Communication Efficient LLM Pre-training with SparseLoCo" (Sarfi, Therien, Lidin, Belilovsky,
2025, arXiv:2508.15706) keeps the ``k`` largest-magnitude entries of each chunk of an
error-feedback-accumulated DiLoCo pseudo-gradient (Douillard et al., 2023) and quantizes them to
2 bits. With the default ``k = 64`` of every ``64 x 64 = 4096`` values (1.56 % density) each kept
value costs 12 bits of index plus 2 bits of value, ``4096 * 32 / (64 * 14) = 146.3x`` fewer bits
than dense fp32. Error feedback lives with the sender (:mod:`subnet.compression.error_feedback`);
this module is only the stateless codec.

Payload parts per tensor (see :mod:`subnet.compression.chunking` for the chunk order):

* ``idx`` -- uint8, the kept positions *within their chunk*, sorted ascending per chunk, packed
  12 bits each (:func:`subnet.compression.packing.pack_12bit`);
* ``val`` -- uint8, one 2-bit code per kept value, packed four to a byte;
* ``cb``  -- float32[4], the tensor's codebook.

The codebook is per tensor, as in the SparseLoCo reference code's statistical quantizer: a
per-chunk one would add ~37 KB (8 %) per merge for ``hypertrain-20m``. With ``t`` the median
magnitude of the tensor's kept values, codes 0..3 are the bins "negative, ``|v| > t``", "negative,
``|v| <= t``", "non-negative, ``|v| <= t``" and "non-negative, ``|v| > t``", and each code decodes
to the mean of its bin. Hence every decoded value has its original sign and lies between the
smallest and largest value of its bin: that is the error bound the tests assert.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from subnet.compression.base import (
    Compressor,
    CompressorInfo,
    PartSpec,
    Payload,
    PayloadError,
    RejectReason,
    Shapes,
    add_sparse,
)
from subnet.compression.chunking import ChunkLayout
from subnet.compression.packing import (
    pack_2bit,
    pack_12bit,
    packed_2bit_len,
    packed_12bit_len,
    unpack_2bit,
    unpack_12bit,
)
from subnet.wire.reasons import Reason


def quantize_2bit(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(codebook float32[4], codes int64[n])`` for the kept values (see module doc)."""
    if values.numel() == 0:
        return values.new_zeros(4), torch.zeros(0, dtype=torch.int64, device=values.device)
    mag = values.abs()
    threshold = mag.median()
    big = (mag > threshold).long()
    codes = torch.where(values < 0, 1 - big, 2 + big)
    sums = values.new_zeros(4).index_add_(0, codes, values)
    counts = torch.bincount(codes, minlength=4).to(values.dtype)
    # An empty bin is never decoded; give it a finite, sign-consistent level anyway.
    fallback = torch.stack([-threshold, -threshold, threshold, threshold])
    codebook = torch.where(counts > 0, sums / counts.clamp(min=1), fallback)
    return codebook.float(), codes


def _top_sorted(chunks: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row top-``k`` by magnitude: ``(indices sorted ascending, their values)``."""
    idx = torch.topk(chunks.abs(), k, dim=-1, sorted=False).indices.sort(dim=-1).values
    return idx, torch.gather(chunks, -1, idx)


class SparseLoCoCompressor(Compressor):
    """Top-``topk`` per chunk of ``chunk x chunk`` values, 2-bit codebook values, 12-bit indices."""

    def __init__(self, topk: int = 64, chunk: int = 64) -> None:
        if chunk * chunk > 4096:
            raise ValueError("chunk*chunk must be <= 4096 so indices fit in 12 bits")
        self.topk = topk
        self.chunk = chunk
        self.info = CompressorInfo(
            "sparseloco",
            lossless=False,
            summary=f"top-{topk} per {chunk}x{chunk}, 2-bit values",
            check="sparse",
        )

    def layout(self, shape: tuple[int, ...]) -> ChunkLayout:
        """The chunk layout this compressor uses for ``shape``."""
        return ChunkLayout.of(shape, self.chunk)

    def select(self, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each chunk's top-k as ``(chunk-local indices int64, values)``, chunks in order.

        Indices ascend within each chunk; full chunks come first (``k_full`` each), then the tail.
        Every SparseLoCo payload format sends exactly this selection, only coded differently.
        """
        layout = self.layout(tuple(tensor.shape))
        k_full, k_tail = layout.kept(self.topk)
        full, tail = layout.split(tensor)
        idx_parts, val_parts = [], []
        if layout.full:
            idx, val = _top_sorted(full, k_full)
            idx_parts.append(idx.reshape(-1))
            val_parts.append(val.reshape(-1))
        if layout.tail:
            idx, val = _top_sorted(tail, k_tail)
            idx_parts.append(idx)
            val_parts.append(val)
        indices = torch.cat(idx_parts) if idx_parts else tensor.new_zeros(0, dtype=torch.int64)
        values = torch.cat(val_parts) if val_parts else tensor.new_zeros(0)
        return indices, values

    def scatter(
        self, indices: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]
    ) -> torch.Tensor:
        """Inverse of :meth:`select`: the kept values back in place, zero everywhere else."""
        layout = self.layout(shape)
        k_full, _ = layout.kept(self.topk)
        cut = layout.full * k_full
        full = values.new_zeros(layout.full, layout.size)
        full.scatter_(
            1, indices[:cut].reshape(layout.full, k_full), values[:cut].reshape(layout.full, k_full)
        )
        tail = values.new_zeros(layout.tail)
        tail.scatter_(0, indices[cut:], values[cut:])
        return layout.join(full, tail)

    def encode_tensor(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """Select, sort, quantize and pack one tensor's top-k per chunk."""
        indices, values = self.select(tensor)
        codebook, codes = quantize_2bit(values)
        return {"idx": pack_12bit(indices), "val": pack_2bit(codes), "cb": codebook}

    def part_specs(self, shape: tuple[int, ...]) -> dict[str, PartSpec]:
        """Packed index and code lengths follow from the layout; the codebook has four levels."""
        kept = self.layout(shape).total_kept(self.topk)
        return {
            "idx": PartSpec(torch.uint8, packed_12bit_len(kept)),
            "val": PartSpec(torch.uint8, packed_2bit_len(kept)),
            "cb": PartSpec(torch.float32, 4),
        }

    def _chunk_indices(
        self, packed: torch.Tensor, layout: ChunkLayout
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Unpack indices into ``(full [n, k], tail [k_tail])``."""
        k_full, k_tail = layout.kept(self.topk)
        flat = unpack_12bit(packed, layout.total_kept(self.topk))
        cut = layout.full * k_full
        return flat[:cut].reshape(layout.full, k_full), flat[cut : cut + k_tail]

    def check_parts(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> RejectReason | None:
        """Indices inside their chunk and strictly increasing; codebook finite."""
        if not bool(torch.isfinite(parts["cb"]).all()):
            return Reason.NON_FINITE
        layout = self.layout(shape)
        full, tail = self._chunk_indices(parts["idx"], layout)
        for idx, size in ((full, layout.size), (tail.unsqueeze(0), layout.tail)):
            if idx.numel() == 0:
                continue
            if int(idx.max()) >= size:
                return Reason.INDEX_OUT_OF_RANGE
            if not bool((idx[:, 1:] > idx[:, :-1]).all()):
                return Reason.UNSORTED_INDEX
        return None

    def decode_tensor(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> torch.Tensor:
        """Scatter the codebook levels back into their chunks; everything else is zero."""
        kept = self.layout(shape).total_kept(self.topk)
        indices = unpack_12bit(parts["idx"], kept)
        values = parts["cb"][unpack_2bit(parts["val"], kept)]
        return self.scatter(indices, values, shape)

    def support(self, payload: Payload, shapes: Shapes) -> np.ndarray:
        """Sorted global coordinates of the kept values: tensors in sorted name order, each
        ``offset + chunk * chunk_size + index`` (see :meth:`Compressor.support`)."""
        reason = self.validate(payload, shapes)
        if reason is not None:
            raise PayloadError(reason, self.info.name)
        parts, offset = [], 0
        for name in sorted(shapes):
            shape = tuple(shapes[name])
            layout = self.layout(shape)
            k_full = layout.kept(self.topk)[0]
            idx = unpack_12bit(payload[f"{name}::idx"], layout.total_kept(self.topk)).numpy()
            chunk = np.minimum(np.arange(idx.size) // k_full, layout.full)
            parts.append(offset + chunk * layout.size + idx)
            offset += math.prod(shape)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def norm(self, payload: Payload, shapes: Shapes) -> float:
        """L2 norm of the decoded update from the codebooks and codes alone (no dense decode)."""
        reason = self.validate(payload, shapes)
        if reason is not None:
            raise PayloadError(reason, self.info.name)
        total = 0.0
        for name, shape in shapes.items():
            codes = unpack_2bit(
                payload[f"{name}::val"], self.layout(tuple(shape)).total_kept(self.topk)
            )
            total += float(payload[f"{name}::cb"].double()[codes].pow(2).sum())
        return math.sqrt(total)

    def add_into(
        self,
        payload: Payload,
        shapes: Shapes,
        num: dict[str, torch.Tensor],
        den: dict[str, torch.Tensor] | None,
        factor: float,
        scale: float,
    ) -> None:
        """Add only the kept values into the sums (see :meth:`Compressor.add_into`)."""
        reason = self.validate(payload, shapes)
        if reason is not None:
            raise PayloadError(reason, self.info.name)
        for name, shape in shapes.items():
            layout = self.layout(tuple(shape))
            kept = layout.total_kept(self.topk)
            indices = unpack_12bit(payload[f"{name}::idx"], kept)
            values = payload[f"{name}::cb"][unpack_2bit(payload[f"{name}::val"], kept)]
            flat = layout.flat_positions(indices, layout.kept(self.topk)[0])
            add_sparse(num, den, name, values, flat, factor, scale, tuple(shape))
