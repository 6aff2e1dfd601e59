"""Rice coding of non-negative integers, with the unary and the binary halves in separate streams.

A Rice code with parameter ``k`` (Golomb, 1966; Rice, 1979) writes ``g`` as the quotient
``q = g >> k`` in unary (``q`` zero bits, then a one) followed by the remainder ``g & (2**k - 1)``
in ``k`` plain bits. For a geometric-like source (the gaps between sorted top-k indices) it comes
within a few percent of the entropy and needs no table.

Keeping the unary bits and the remainder bits in two streams costs nothing in size and makes
decoding a handful of vectorized numpy calls instead of a bit-by-bit loop: the quotients are the
distances between consecutive one bits of the unary stream, and the remainders are a fixed-width
array. Both streams are packed most significant bit first (``np.packbits``) and padded with zero
bits to a whole byte, so every sequence has exactly one encoding (readers reject anything else).
"""

from __future__ import annotations

import numpy as np

#: Largest parameter tried; gaps inside a 4096-value chunk never need more than 12 plain bits.
MAX_K = 12


def best_k(gaps: np.ndarray) -> int:
    """The ``k`` in ``[0, MAX_K]`` that codes ``gaps`` in the fewest bits."""
    if gaps.size == 0:
        return 0
    costs = [int((gaps >> k).sum()) + gaps.size * (k + 1) for k in range(MAX_K + 1)]
    return int(np.argmin(costs))


def unary_bits(gaps: np.ndarray, k: int) -> np.ndarray:
    """The unary half as a 0/1 ``uint8`` array: ``q`` zeros then a one, per value."""
    ends = np.cumsum((gaps >> k) + 1) - 1
    bits = np.zeros(int(ends[-1]) + 1 if gaps.size else 0, dtype=np.uint8)
    bits[ends] = 1
    return bits


def remainder_bits(gaps: np.ndarray, k: int) -> np.ndarray:
    """The binary half as a 0/1 ``uint8`` array: ``k`` bits per value, most significant first."""
    shifts = np.arange(k - 1, -1, -1, dtype=np.int64)
    return ((gaps[:, None] >> shifts) & 1).astype(np.uint8).reshape(-1)


def pack(bits: np.ndarray) -> np.ndarray:
    """0/1 bits to bytes, most significant bit first, zero-padded to a whole byte."""
    return np.packbits(bits)


def unpack(data: np.ndarray, nbits: int) -> np.ndarray | None:
    """The first ``nbits`` bits of ``data``; ``None`` unless ``data`` is exactly that long with
    zero padding (the one canonical encoding)."""
    if data.size != (nbits + 7) // 8:
        return None
    bits = np.unpackbits(data)
    if bits[nbits:].any():
        return None
    return bits[:nbits]


def quotients(unary: np.ndarray, count: int) -> np.ndarray | None:
    """Decode ``count`` quotients from a packed unary stream; ``None`` if it does not hold exactly
    ``count`` codes with canonical padding."""
    bits = np.unpackbits(unary)
    ends = np.flatnonzero(bits)
    if ends.size != count:
        return None
    used = int(ends[-1]) + 1 if count else 0
    if unary.size != (used + 7) // 8:  # trailing bytes beyond the last code: not canonical
        return None
    return np.diff(ends, prepend=-1) - 1


def remainders(bits: np.ndarray, k: int, count: int) -> np.ndarray:
    """``count`` fixed-width ``k``-bit values from unpacked remainder bits (``count * k`` bits)."""
    if k == 0:
        return np.zeros(count, dtype=np.int64)
    # A float32 product is exact here (k <= MAX_K: every value below 2**24) and 2.7x faster
    # than an integer one, which numpy does without BLAS
    weights = np.left_shift(1, np.arange(k - 1, -1, -1)).astype(np.float32)
    return (bits.reshape(count, k).astype(np.float32) @ weights).astype(np.int64)
