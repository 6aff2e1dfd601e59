"""Bit packing for sparse payloads: 12-bit indices and 2-bit codes, both as flat ``uint8`` tensors.

Payloads are safetensors, which has no sub-byte dtypes, so the packed bits travel as ``uint8``.
Both layouts are little-endian within their group, and both are exact inverses of their unpackers
for every valid input (the tests round-trip random arrays bit for bit).
"""

from __future__ import annotations

import numpy as np
import torch

INDEX_BITS = 12
#: Largest chunk a 12-bit index can address.
MAX_INDEX = 1 << INDEX_BITS


def packed_12bit_len(count: int) -> int:
    """Bytes needed for ``count`` 12-bit values (two values share three bytes)."""
    return (3 * count + 1) // 2


def pack_12bit(values: torch.Tensor) -> torch.Tensor:
    """Pack integers in ``[0, 4096)`` into a flat ``uint8`` tensor, two values per three bytes.

    Layout for a pair ``(a, b)``: ``byte0 = a & 0xFF``, ``byte1 = (a >> 8) | ((b & 0xF) << 4)``,
    ``byte2 = b >> 4``. An odd count is padded with one zero value whose half byte is dropped.
    """
    flat = values.reshape(-1).to(torch.int32)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= MAX_INDEX):
        raise ValueError("pack_12bit: values must lie in [0, 4096)")
    count = flat.numel()
    if count % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    pairs = flat.view(-1, 2)
    a, b = pairs[:, 0], pairs[:, 1]
    out = torch.stack([a & 0xFF, (a >> 8) | ((b & 0xF) << 4), b >> 4], dim=1)
    return out.reshape(-1)[: packed_12bit_len(count)].to(torch.uint8)


def unpack_12bit(packed: torch.Tensor, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_12bit`: return ``count`` values as ``int64``."""
    if packed.dtype != torch.uint8 or packed.numel() != packed_12bit_len(count):
        raise ValueError("unpack_12bit: wrong dtype or length for the given count")
    raw = packed.reshape(-1).to(torch.int32)
    if count % 2:
        raw = torch.cat([raw, raw.new_zeros(1)])
    triples = raw.view(-1, 3)
    b0, b1, b2 = triples[:, 0], triples[:, 1], triples[:, 2]
    a = b0 | ((b1 & 0xF) << 8)
    b = (b1 >> 4) | (b2 << 4)
    return torch.stack([a, b], dim=1).reshape(-1)[:count].to(torch.int64)


def packed_2bit_len(count: int) -> int:
    """Bytes needed for ``count`` 2-bit codes (four per byte)."""
    return (count + 3) // 4


def pack_2bit(codes: torch.Tensor) -> torch.Tensor:
    """Pack codes in ``[0, 4)`` four to a byte; code ``i`` of a group sits at bits ``2i..2i+1``."""
    flat = codes.reshape(-1).to(torch.int32)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) > 3):
        raise ValueError("pack_2bit: codes must lie in [0, 4)")
    count = flat.numel()
    pad = (-count) % 4
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    quads = flat.view(-1, 4)
    out = quads[:, 0] | (quads[:, 1] << 2) | (quads[:, 2] << 4) | (quads[:, 3] << 6)
    return out.to(torch.uint8)


def unpack_2bit(packed: torch.Tensor, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_2bit`: return ``count`` codes as ``int64``."""
    if packed.dtype != torch.uint8 or packed.numel() != packed_2bit_len(count):
        raise ValueError("unpack_2bit: wrong dtype or length for the given count")
    if packed.device.type == "cpu":
        # One table lookup a byte, in numpy: no multi-threaded torch kernel for a reader to
        # wait on (on a busy 2-core machine those waits made this 0.7 ms read take 29 ms)
        return torch.from_numpy(_CODES[packed.numpy()].reshape(-1)[:count])
    raw = packed.reshape(-1, 1).to(torch.int32)
    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.int32, device=packed.device)
    return ((raw >> shifts) & 0x3).reshape(-1)[:count].to(torch.int64)


# byte -> its four 2-bit codes, the first in the lowest bits (``pack_2bit``'s order)
_CODES = (np.arange(256, dtype=np.int64)[:, None] >> np.array([0, 2, 4, 6])) & 0x3
