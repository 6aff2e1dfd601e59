"""SparseLoCo with Rice-coded indices: the same selection and 2-bit values, ~40 % fewer bytes.

The top-k selection, the 2-bit codebook and therefore every decoded value are exactly those of
:class:`~subnet.compression.sparseloco.SparseLoCoCompressor` (a test checks bit equality); only
the indices are coded differently. Within a chunk the kept positions ascend, so they are sent as
gaps ``g_0 = i_0``, ``g_j = i_j - i_{j-1} - 1`` (all >= 0), Rice-coded with one parameter per
tensor chosen by the encoder (:mod:`subnet.compression.rice`). Top-k positions of a real
pseudo-gradient cluster (hot embedding rows, hot attention columns), which Rice exploits: for
``hypertrain-20m`` the indices drop from 12 bits to about 7.4 bits each.

The payload is one set of streams for the whole model rather than parts per tensor, so the
safetensors table holds five entries instead of three per tensor (for ``hypertrain-20m`` that
table alone was 11.8 kB of a 535 kB upload). Tensors are coded in sorted name order:

* ``rice::k``     -- uint8[T], the Rice parameter of each tensor (0..12);
* ``rice::unary`` -- uint8, the quotients of every gap, unary, one bitstream;
* ``rice::rem``   -- uint8, the remainders, ``k`` bits per gap of each tensor, one bitstream;
* ``val``         -- uint8, the 2-bit codes of every kept value, packed four to a byte;
* ``cb``          -- float32[4 T], the per-tensor codebooks.

A reader rejects, with a reason, any stream whose length, padding or code count does not match
the shapes, any index past its chunk, and any non-finite codebook; decoding never reads past the
streams, and the unary stream is length-checked before it is expanded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from subnet.compression import rice
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
from subnet.compression.packing import pack_2bit, packed_2bit_len, unpack_2bit
from subnet.compression.sparseloco import SparseLoCoCompressor, quantize_2bit
from subnet.wire.reasons import Reason

_PARTS: dict[str, torch.dtype] = {
    "rice::k": torch.uint8,
    "rice::unary": torch.uint8,
    "rice::rem": torch.uint8,
    "val": torch.uint8,
    "cb": torch.float32,
}


@dataclass(frozen=True)
class Sparse:
    """One tensor's decoded selection: chunk-local indices and 2-bit codes, in chunk order."""

    indices: np.ndarray  # int64 [kept]
    codes: torch.Tensor  # int64 [kept]
    codebook: torch.Tensor  # float32 [4]


def chunk_gaps(indices: np.ndarray, layout: ChunkLayout, k_full: int) -> np.ndarray:
    """Ascending chunk-local indices to gaps (``i_0``, then ``i_j - i_{j-1} - 1``), chunk by chunk."""
    cut = layout.full * k_full
    full = np.diff(indices[:cut].reshape(layout.full, k_full), axis=1, prepend=-1) - 1
    tail = np.diff(indices[cut:], prepend=-1) - 1
    return np.concatenate([full.reshape(-1), tail])


def chunk_indices(gaps: np.ndarray, layout: ChunkLayout, k_full: int) -> np.ndarray | None:
    """Inverse of :func:`chunk_gaps`; ``None`` if an index falls outside its chunk."""
    cut = layout.full * k_full
    full = np.cumsum(gaps[:cut].reshape(layout.full, k_full) + 1, axis=1) - 1
    tail = np.cumsum(gaps[cut:] + 1) - 1
    if (full.size and int(full[:, -1].max()) >= layout.size) or (
        tail.size and int(tail[-1]) >= layout.tail
    ):
        return None
    return np.concatenate([full.reshape(-1), tail])


class WholePayloadCompressor(Compressor):
    """A codec whose payload is coded as a whole (Rice streams over every tensor): the base
    class's per-tensor hooks do not apply, and a payload is valid when :meth:`parse` accepts it."""

    def parse(self, payload: Payload, shapes: Shapes) -> Mapping[str, Coded]:
        """Check every part against ``shapes`` and decode the selection; raises PayloadError."""
        raise NotImplementedError

    def encode_tensor(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """Not used: see :meth:`encode`."""
        raise NotImplementedError(f"{self.info.name} encodes whole payloads")

    def part_specs(self, shape: tuple[int, ...]) -> dict[str, PartSpec]:
        """Not used: see :meth:`validate`."""
        raise NotImplementedError(f"{self.info.name} validates whole payloads")

    def decode_tensor(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> torch.Tensor:
        """Not used: see :meth:`decode`."""
        raise NotImplementedError(f"{self.info.name} decodes whole payloads")

    def validate(self, payload: Payload, shapes: Shapes) -> RejectReason | None:
        """Why ``payload`` is not a valid encoding for ``shapes``, or ``None``."""
        try:
            self.parse(payload, shapes)
        except PayloadError as error:
            return error.reason
        return None

    def norm(self, payload: Payload, shapes: Shapes) -> float:
        """L2 norm of the decoded update, from the codebooks and codes alone (no dense decode)."""
        return codebook_norm(self.parse(payload, shapes))

    def support_of(self, parsed: Mapping[str, Coded], shapes: Shapes) -> np.ndarray:
        """Sorted global coordinates of a parsed payload's kept values (:meth:`support`)."""
        raise NotImplementedError

    def support(self, payload: Payload, shapes: Shapes) -> np.ndarray:
        """Sorted global coordinates of the kept values (see :meth:`Compressor.support`)."""
        return self.support_of(self.parse(payload, shapes), shapes)

    def measure(self, payload: Payload, shapes: Shapes) -> tuple[np.ndarray, float]:
        """``(support, norm)`` from one parse of the payload (the validator's screen of every
        upload: half the parsing of asking for each)."""
        parsed = self.parse(payload, shapes)
        return self.support_of(parsed, shapes), codebook_norm(parsed)


class SparseLoCoRiceCompressor(WholePayloadCompressor):
    """SparseLoCo's top-k and 2-bit values, with Rice-coded per-chunk index gaps."""

    def __init__(self, topk: int = 64, chunk: int = 64) -> None:
        self.sparse = SparseLoCoCompressor(topk, chunk)
        self.info = CompressorInfo(
            "sparseloco-rice",
            lossless=False,
            summary=f"top-{topk} per {chunk}x{chunk}, 2-bit values, Rice-coded indices",
            check="sparse",
        )

    def _layout(self, shape: tuple[int, ...]) -> tuple[ChunkLayout, int, int]:
        layout = self.sparse.layout(tuple(shape))
        return layout, layout.kept(self.sparse.topk)[0], layout.total_kept(self.sparse.topk)

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> Payload:
        """Select and quantize each tensor as SparseLoCo does, then Rice-code the index gaps."""
        gaps, codes, books = [], [], []
        for name in sorted(tensors):
            tensor = tensors[name].detach().float()
            indices, values = self.sparse.select(tensor)
            codebook, code = quantize_2bit(values)
            layout, k_full, _ = self._layout(tuple(tensor.shape))
            gaps.append(chunk_gaps(indices.cpu().numpy(), layout, k_full))
            codes.append(code.cpu())
            books.append(codebook.cpu())
        return rice_parts(gaps, codes, books)

    def parse(self, payload: Payload, shapes: Shapes) -> dict[str, Sparse]:
        """Check every stream against ``shapes`` and decode the selection; raises PayloadError."""
        check_parts(payload, _PARTS, {})
        names = sorted(shapes)
        layouts = [self._layout(tuple(shapes[n])) for n in names]
        kept = [total for _, _, total in layouts]
        total = sum(kept)
        sizes = {"rice::k": len(names), "cb": 4 * len(names), "val": packed_2bit_len(total)}
        check_parts(payload, {}, sizes)
        ks = payload["rice::k"].tolist()
        if any(k > rice.MAX_K for k in ks):
            raise PayloadError(Reason.INVALID_VALUE, "rice::k")
        q, r = rice_streams(payload, [math.prod(shapes[n]) for n in names], kept, ks)
        codes = unpack_2bit(payload["val"], total)
        books = payload["cb"].reshape(-1, 4)
        out: dict[str, Sparse] = {}
        offset = 0
        for i, name in enumerate(names):
            layout, k_full, n = layouts[i]
            gaps = (q[offset : offset + n] << ks[i]) | r[i]
            indices = chunk_indices(gaps, layout, k_full)
            if indices is None:
                raise PayloadError(Reason.INDEX_OUT_OF_RANGE, name)
            out[name] = Sparse(indices, codes[offset : offset + n], books[i])
            offset += n
        return out

    def decode(self, payload: Payload, shapes: Shapes) -> dict[str, torch.Tensor]:
        """Validate, then scatter each tensor's codebook levels into place (fp32)."""
        parsed = self.parse(payload, shapes)
        return {
            name: self.sparse.scatter(
                torch.from_numpy(parsed[name].indices),
                parsed[name].codebook[parsed[name].codes],
                tuple(shapes[name]),
            )
            for name in shapes
        }

    def support_of(self, parsed: Mapping[str, Sparse], shapes: Shapes) -> np.ndarray:
        """Sorted global coordinates of the kept values (see :meth:`Compressor.support`)."""
        return _coordinates({n: parsed[n].indices for n in parsed}, shapes, self.sparse)

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
            layout, k_full, _ = self._layout(tuple(shape))
            sel = parsed[name]
            flat = layout.flat_positions(torch.from_numpy(sel.indices), k_full)
            add_sparse(num, den, name, sel.codebook[sel.codes], flat, factor, scale, tuple(shape))


def _coordinates(
    indices: Mapping[str, np.ndarray], shapes: Shapes, sparse: SparseLoCoCompressor
) -> np.ndarray:
    """Chunk-local indices to one sorted coordinate space: tensors in sorted name order, each
    ``chunk * chunk_size + index``. Any bijection serves copy detection; this one is monotone."""
    parts, offset = [], 0
    for name in sorted(shapes):
        layout = sparse.layout(tuple(shapes[name]))
        k_full = layout.kept(sparse.topk)[0]
        idx = indices[name]
        parts.append(layout.chunk_starts(k_full, idx.size) + (idx + offset))
        offset += math.prod(shapes[name])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def check_parts(
    payload: Payload, parts: Mapping[str, torch.dtype], sizes: Mapping[str, int]
) -> None:
    """Every one of ``parts`` present, 1-D, of its dtype, and nothing else; each of ``sizes`` of
    its length, in that order; a finite ``cb`` among them. Raises PayloadError."""
    for key, dtype in parts.items():
        if key not in payload:
            raise PayloadError(Reason.MISSING_TENSOR, key)
        if payload[key].dtype != dtype:
            raise PayloadError(Reason.DTYPE_MISMATCH, key)
        if payload[key].dim() != 1:
            raise PayloadError(Reason.SHAPE_MISMATCH, key)
    if parts and set(payload) - set(parts):
        raise PayloadError(Reason.UNEXPECTED_TENSOR, ", ".join(sorted(set(payload) - set(parts))))
    for key, numel in sizes.items():
        if payload[key].numel() != numel:
            raise PayloadError(Reason.SHAPE_MISMATCH, key)
    if "cb" in sizes and not bool(torch.isfinite(payload["cb"]).all()):
        raise PayloadError(Reason.NON_FINITE, "cb")


def rice_parts(
    gaps: list[np.ndarray], codes: list[torch.Tensor], books: list[torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The Rice-coded streams of each tensor's index ``gaps`` (one parameter per tensor) and
    its 2-bit ``codes`` and ``books``: the parts every Rice-coded sparse payload carries."""
    ks = [rice.best_k(g) for g in gaps]
    unary = [rice.unary_bits(g, k) for g, k in zip(gaps, ks, strict=True)]
    rem = [rice.remainder_bits(g, k) for g, k in zip(gaps, ks, strict=True)]
    cat = np.concatenate
    return {
        "rice::k": torch.tensor(ks, dtype=torch.uint8),
        "rice::unary": torch.from_numpy(rice.pack(cat(unary) if unary else np.zeros(0, "u1"))),
        "rice::rem": torch.from_numpy(rice.pack(cat(rem) if rem else np.zeros(0, "u1"))),
        "val": pack_2bit(torch.cat(codes) if codes else torch.zeros(0, dtype=torch.int64)),
        "cb": torch.cat(books) if books else torch.zeros(0),
    }


def rice_streams(
    payload: Payload, sizes: list[int], kept: list[int], ks: list[int]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The quotients of every gap and each tensor's remainders, from a payload's ``rice::unary``
    and ``rice::rem`` streams (tensors of ``sizes`` values, ``kept`` indices each, Rice
    parameters ``ks``); raises PayloadError. Shared by every Rice-coded sparse codec."""
    # The longest honest unary stream: every gap's quotient is at most gap >> k, and a tensor's
    # gaps sum to at most (size - kept). Checked before the stream is expanded.
    longest = sum(n + ((size - n) >> k) for size, n, k in zip(sizes, kept, ks, strict=True))
    unary = payload["rice::unary"].numpy()
    if unary.size > (longest + 7) // 8:
        raise PayloadError(Reason.SHAPE_MISMATCH, "rice::unary longer than any honest stream")
    q = rice.quotients(unary, sum(kept))
    if q is None:
        raise PayloadError(Reason.SHAPE_MISMATCH, "rice::unary does not hold one code per index")
    nbits = sum(n * k for n, k in zip(kept, ks, strict=True))
    rem = payload["rice::rem"].numpy()
    if rem.size != (nbits + 7) // 8:
        raise PayloadError(Reason.SHAPE_MISMATCH, "rice::rem")
    words = rice.words(rem, nbits)
    if words is None:
        raise PayloadError(Reason.INVALID_VALUE, "rice::rem padding is not zero")
    remainders, start = [], 0
    for n, k in zip(kept, ks, strict=True):
        remainders.append(rice.fields(words, start, k, n))
        start += n * k
    return q, remainders


class Coded(Protocol):
    """A parsed tensor of a sparse codec: its codebook and each kept value's code."""

    codebook: torch.Tensor
    codes: torch.Tensor


def codebook_norm(parsed: Mapping[str, Coded]) -> float:
    """L2 norm of a parsed sparse payload, from its codebooks and codes alone (no dense decode):
    each level's square times how often it was sent (a count per level, not a gather of every
    kept value: 9 ms of a validator's 32 ms read of a ``hypertrain-20m`` upload before), counted
    by numpy on the codes' memory (a third of ``torch.bincount``'s time over a payload's tensors)."""
    total = 0.0
    for s in parsed.values():
        book = s.codebook.double().numpy()
        counts = np.bincount(s.codes.reshape(-1).numpy(), minlength=book.size)
        total += float(counts[: book.size] @ (book * book))
    return math.sqrt(total)
