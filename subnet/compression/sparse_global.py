"""Model-wide top-k with Rice-coded indices and 2-bit values: a sparse broadcast's codec.

SparseLoCo keeps the same number of values in every chunk, which suits a sender whose chunks
all move (a pseudo-gradient). A merge of several uploads does not: most of its energy sits in a
few tensors (on ``tiny``, 60 - 75 % in the token embedding's frequent rows), so a per-chunk budget
spends much of itself on chunks that barely move. This codec keeps the largest-magnitude values
of the *whole model* instead, as many in total as ``sparseloco-rice`` with the same ``topk`` and
``chunk`` keeps (``sum(ChunkLayout.total_kept(topk))``), so a budget means the same number of
values either way; each tensor holds however many of them are its own.

Per tensor, in sorted name order, the kept positions are row-major flat indices, ascending, sent
as gaps (``i_0``, then ``i_j - i_{j-1} - 1``) Rice-coded with one parameter per tensor
(:mod:`subnet.compression.rice`); the values are SparseLoCo's 2-bit codes with one four-level
codebook per tensor (:func:`~subnet.compression.sparseloco.quantize_2bit`). Parts:

* ``n``           -- int32[T], values kept in each tensor (they sum to the budget);
* ``rice::k``     -- uint8[T], each tensor's Rice parameter (0..``rice.MAX_K``);
* ``rice::unary`` -- uint8, every gap's quotient in unary, one bitstream;
* ``rice::rem``   -- uint8, the remainders, ``k`` bits per gap of each tensor, one bitstream;
* ``val``         -- uint8, the 2-bit codes of every kept value, packed four to a byte;
* ``cb``          -- float32[4 T], the per-tensor codebooks.

Decoding gathers codebook levels and scatters them into zeros, so it is bit-exact everywhere
(the sparse broadcast relies on that). A reader rejects counts that do not sum to the budget or
exceed a tensor, streams whose lengths or padding do not match, indices past their tensor and
non-finite codebooks, before anything is expanded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from subnet.compression import rice
from subnet.compression.base import (
    CompressorInfo,
    Payload,
    PayloadError,
    Shapes,
    add_sparse,
)
from subnet.compression.chunking import ChunkLayout
from subnet.compression.packing import packed_2bit_len, unpack_2bit
from subnet.compression.sparseloco import quantize_2bit
from subnet.compression.sparseloco_rice import (
    WholePayloadCompressor,
    check_parts,
    rice_parts,
    rice_streams,
)
from subnet.wire.reasons import Reason

_PARTS: dict[str, torch.dtype] = {
    "n": torch.int32,
    "rice::k": torch.uint8,
    "rice::unary": torch.uint8,
    "rice::rem": torch.uint8,
    "val": torch.uint8,
    "cb": torch.float32,
}


@dataclass(frozen=True)
class Kept:
    """One tensor's decoded selection: ascending flat indices and their 2-bit codes."""

    indices: np.ndarray  # int64 [n]
    codes: torch.Tensor  # int64 [n]
    codebook: torch.Tensor  # float32 [4]


class SparseGlobalRiceCompressor(WholePayloadCompressor):
    """The model's largest values (SparseLoCo's budget in total), Rice-coded, 2-bit values."""

    def __init__(self, topk: int = 64, chunk: int = 64) -> None:
        self.topk = topk
        self.chunk = chunk
        self.info = CompressorInfo(
            "sparse-global-rice",
            lossless=False,
            summary=f"model-wide top-k ({topk} per {chunk}x{chunk} on average), 2-bit values, "
            "Rice-coded indices",
            check="other",  # a broadcast codec: never an upload's (refused at the config)
        )

    def budget(self, shapes: Shapes) -> int:
        """Values kept over the model: what ``sparseloco-rice`` keeps with the same settings."""
        return sum(
            ChunkLayout.of(tuple(s), self.chunk).total_kept(self.topk) for s in shapes.values()
        )

    def _threshold(self, tensors: Mapping[str, torch.Tensor], count: int) -> float:
        """The ``count``-th largest magnitude over every tensor (``inf`` when ``count`` is 0).

        A radix select on the bit patterns of the magnitudes (for non-negative floats the int32
        pattern orders as the value): a histogram of the high 16 bits over every tensor finds
        the bucket, a second of the low 16 bits inside it the value. Memory stays one tensor's
        worth, not the model's.
        """
        if count == 0:
            return math.inf

        def bits() -> Iterator[torch.Tensor]:
            for t in tensors.values():
                yield t.abs().reshape(-1).view(torch.int32)

        high = sum(torch.bincount(b >> 16, minlength=1 << 16) for b in bits())
        above = torch.flip(torch.cumsum(torch.flip(high, [0]), 0), [0])  # count >= each bucket
        bucket = int(torch.nonzero(above >= count).reshape(-1)[-1])
        need = count - (int(above[bucket + 1]) if bucket + 1 < above.numel() else 0)
        low = sum(
            torch.bincount(b[(b >> 16) == bucket] & 0xFFFF, minlength=1 << 16) for b in bits()
        )
        low_above = torch.flip(torch.cumsum(torch.flip(low, [0]), 0), [0])
        value = int(torch.nonzero(low_above >= need).reshape(-1)[-1])
        return float(torch.tensor([(bucket << 16) | value], dtype=torch.int32).view(torch.float32))

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> Payload:
        """Keep the model's ``budget`` largest magnitudes; Rice-code gaps, 2-bit-code values."""
        names = sorted(tensors)
        flat = {n: tensors[n].detach().float().reshape(-1).cpu() for n in names}
        count = self.budget({n: tuple(tensors[n].shape) for n in names})
        threshold = self._threshold(flat, count)
        # Strictly above the threshold everywhere, then ties in sorted name and index order, so
        # exactly `count` values are kept whatever the ties.
        above = {n: flat[n].abs() > threshold for n in names}
        room = count - sum(int(a.sum()) for a in above.values())
        counts, gaps, codes, books = [], [], [], []
        for n in names:
            keep = above[n]
            if room > 0:
                ties = torch.nonzero(flat[n].abs() == threshold).reshape(-1)[:room]
                keep = keep.clone()
                keep[ties] = True
                room -= ties.numel()
            indices = torch.nonzero(keep).reshape(-1)
            codebook, code = quantize_2bit(flat[n][indices])
            gaps.append(np.diff(indices.numpy(), prepend=-1) - 1)
            counts.append(indices.numel())
            codes.append(code)
            books.append(codebook)
        return {"n": torch.tensor(counts, dtype=torch.int32), **rice_parts(gaps, codes, books)}

    def parse(self, payload: Payload, shapes: Shapes) -> dict[str, Kept]:
        """Check every stream against ``shapes`` and decode the selection; raises PayloadError."""
        names = sorted(shapes)
        check_parts(payload, _PARTS, {"n": len(names), "rice::k": len(names), "cb": 4 * len(names)})
        sizes = [math.prod(shapes[n]) for n in names]
        kept = [int(c) for c in payload["n"].tolist()]
        if any(c < 0 or c > s for c, s in zip(kept, sizes, strict=True)):
            raise PayloadError(Reason.INVALID_VALUE, "n: a count outside its tensor")
        if sum(kept) != self.budget(shapes):
            raise PayloadError(Reason.SHAPE_MISMATCH, "n: the counts do not sum to the budget")
        if payload["val"].numel() != packed_2bit_len(sum(kept)):
            raise PayloadError(Reason.SHAPE_MISMATCH, "val")
        ks = payload["rice::k"].tolist()
        if any(k > rice.MAX_K for k in ks):
            raise PayloadError(Reason.INVALID_VALUE, "rice::k")
        q, r = rice_streams(payload, sizes, kept, ks)
        codes = unpack_2bit(payload["val"], sum(kept))
        books = payload["cb"].reshape(-1, 4)
        out: dict[str, Kept] = {}
        offset = 0
        for i, name in enumerate(names):
            n = kept[i]
            indices = np.cumsum(((q[offset : offset + n] << ks[i]) | r[i]) + 1) - 1
            if n and int(indices[-1]) >= sizes[i]:
                raise PayloadError(Reason.INDEX_OUT_OF_RANGE, name)
            out[name] = Kept(indices, codes[offset : offset + n], books[i])
            offset += n
        return out

    def decode(self, payload: Payload, shapes: Shapes) -> dict[str, torch.Tensor]:
        """Validate, then scatter each tensor's codebook levels into place (fp32)."""
        parsed = self.parse(payload, shapes)
        out = {}
        for name, shape in shapes.items():
            sel = parsed[name]
            flat = torch.zeros(math.prod(shape), dtype=torch.float32)
            flat[torch.from_numpy(sel.indices)] = sel.codebook[sel.codes]
            out[name] = flat.reshape(tuple(shape))
        return out

    def support_of(self, parsed: Mapping[str, Kept], shapes: Shapes) -> np.ndarray:
        """Sorted global coordinates (tensors in sorted name order, row-major within each)."""
        parts, offset = [], 0
        for name in sorted(shapes):
            parts.append(offset + parsed[name].indices)
            offset += math.prod(shapes[name])
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

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
        parsed = self.parse(payload, shapes)
        for name, shape in shapes.items():
            sel = parsed[name]
            flat = torch.from_numpy(sel.indices)
            add_sparse(num, den, name, sel.codebook[sel.codes], flat, factor, scale, tuple(shape))
