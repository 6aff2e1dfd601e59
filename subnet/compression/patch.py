"""Lossless model patch: version ``v+1`` as the bit-level difference from version ``v``.

A new model version is broadcast to every miner and validator, so it must be exact: a reader that
applies the patch to its copy of ``v`` gets ``v+1`` bit for bit, or gets an error. Per tensor (names
in sorted order), the patch records the flat positions whose bits changed, delta-encoded as
little-endian uint32, and the XOR of old and new bits at those positions, byte-shuffled (all first
bytes, then all second bytes, ...) because the high bytes of a small update's XOR are mostly zero.
The whole stream is zlib-compressed. Both the base and the target state carry a sha256, so a patch
applied to the wrong base, or one that was corrupted, is rejected with a reason.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping

import numpy as np
import torch

from subnet.compression.base import Payload
from subnet.wire.reasons import Reason

# Why a patch does not apply (``base_mismatch``, ``hash_mismatch``, ``shape_mismatch``,
# ``index_out_of_range``): members of the one reason enum.
PatchRejectReason = Reason

_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class PatchError(ValueError):
    """A patch that cannot be applied; ``reason`` says why."""

    def __init__(self, reason: PatchRejectReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason: PatchRejectReason = reason


def _bits(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's raw bits as a flat numpy integer array of the same width."""
    flat = tensor.detach().contiguous().cpu().reshape(-1)
    return flat.view(_INT_VIEW[flat.element_size()]).numpy()


def state_digest(tensors: Mapping[str, torch.Tensor]) -> bytes:
    """sha256 over names, dtypes, shapes and raw bytes of every tensor, in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(_bits(t).tobytes())
    return h.digest()


def _digest_tensor(digest: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(digest), dtype=torch.uint8)


def encode_patch(
    base: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor], level: int = 6
) -> Payload:
    """Encode ``target`` as a patch against ``base`` (same names, shapes and dtypes)."""
    if set(base) != set(target):
        raise ValueError("base and target must have the same tensor names")
    stream: list[bytes] = []
    counts: list[int] = []
    for name in sorted(base):
        b, t = base[name], target[name]
        if b.shape != t.shape or b.dtype != t.dtype:
            raise ValueError(f"{name}: base and target differ in shape or dtype")
        if b.numel() >= 2**32:
            raise ValueError(f"{name}: tensors past 2**32 values are not supported")
        old, new = _bits(b), _bits(t)
        positions = np.flatnonzero(old != new)
        deltas = np.diff(positions, prepend=0).astype("<u4")
        xor = (old[positions] ^ new[positions]).astype(old.dtype.newbyteorder("<"))
        shuffled = xor.view(np.uint8).reshape(-1, xor.itemsize).T.tobytes()
        stream += [deltas.tobytes(), shuffled]
        counts.append(len(positions))
    data = zlib.compress(b"".join(stream), level)
    return {
        "data": torch.frombuffer(bytearray(data), dtype=torch.uint8),
        "counts": torch.tensor(counts, dtype=torch.int64),
        "base_sha256": _digest_tensor(state_digest(base)),
        "target_sha256": _digest_tensor(state_digest(target)),
    }


def apply_patch(base: Mapping[str, torch.Tensor], patch: Payload) -> dict[str, torch.Tensor]:
    """Return ``target`` rebuilt from ``base`` and ``patch``; raises :class:`PatchError`.

    The base hash is checked before anything is decompressed, and decompression is capped at the
    size the counts imply, so a hostile patch cannot make the reader inflate unbounded data. The
    result lives on the CPU; the final sha256 check catches any corruption the bounds miss.
    """
    if bytes(patch["base_sha256"].numpy()) != state_digest(base):
        raise PatchError(Reason.BASE_MISMATCH)
    names = sorted(base)
    counts = patch["counts"].tolist()
    if len(counts) != len(names) or any(
        c < 0 or c > base[n].numel() for c, n in zip(counts, names, strict=True)
    ):
        raise PatchError(Reason.SHAPE_MISMATCH, "counts do not fit the base")
    expected = sum(c * (4 + base[n].element_size()) for c, n in zip(counts, names, strict=True))
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(patch["data"].numpy().tobytes(), expected + 1)
    except zlib.error as exc:
        raise PatchError(Reason.CORRUPT, str(exc)) from None
    if len(raw) != expected or not inflater.eof:
        raise PatchError(Reason.SHAPE_MISMATCH, "decompressed size does not match the counts")
    out: dict[str, torch.Tensor] = {}
    offset = 0
    for name, count in zip(names, counts, strict=True):
        old = _bits(base[name]).copy()
        width = old.itemsize
        deltas = np.frombuffer(raw, dtype="<u4", count=count, offset=offset).astype(np.int64)
        offset += 4 * count
        planes = np.frombuffer(raw, dtype=np.uint8, count=count * width, offset=offset)
        offset += count * width
        xor = planes.reshape(width, count).T.copy().view(old.dtype.newbyteorder("<")).reshape(-1)
        positions = np.cumsum(deltas)
        if count and positions[-1] >= old.size:
            raise PatchError(Reason.INDEX_OUT_OF_RANGE, name)
        old[positions] ^= xor.astype(old.dtype)
        restored = torch.from_numpy(old).view(base[name].dtype)
        out[name] = restored.reshape(base[name].shape)
    if state_digest(out) != bytes(patch["target_sha256"].numpy()):
        raise PatchError(Reason.HASH_MISMATCH)
    return out


def patch_nbytes(patch: Payload) -> int:
    """Bytes the patch occupies on the wire."""
    return sum(t.numel() * t.element_size() for t in patch.values())
