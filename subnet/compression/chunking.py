"""How SparseLoCo cuts a tensor into chunks, each of which keeps its own top-k.

The rule is a pure function of the shape and the block side ``c`` (64 by default), so sender and
reader agree without sending any layout:

* a 2-D tensor whose both sides are multiples of ``c`` is cut into ``c x c`` blocks, row-major over
  the block grid (each block flattened row-major) -- the layout of SparseLoCo (Sarfi et al., 2025);
* any other tensor (1-D norms, biases, an embedding whose row count is not a multiple of ``c``) is
  flattened row-major and cut into chunks of ``c * c`` values, the last one possibly shorter (the
  *tail*). For ``hypertrain-20m`` the 50,000 x 256 embedding becomes 3,125 chunks of 16 whole rows.

A full chunk keeps ``k`` values; a tail of ``L`` values keeps ``ceil(k * L / c**2)`` (at least one,
at most ``L``), so every value faces about the same density.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class ChunkLayout:
    """Chunk geometry of one tensor: ``full`` chunks of ``size`` values, then an optional tail."""

    shape: tuple[int, ...]
    side: int
    blocked: bool
    full: int
    size: int
    tail: int

    @classmethod
    def of(cls, shape: tuple[int, ...], side: int) -> ChunkLayout:
        """The layout for a tensor of ``shape`` with block side ``side``."""
        size = side * side
        if len(shape) == 2 and shape[0] % side == 0 and shape[1] % side == 0:
            return cls(tuple(shape), side, True, math.prod(shape) // size, size, 0)
        numel = math.prod(shape)
        return cls(tuple(shape), side, False, numel // size, size, numel % size)

    def kept(self, topk: int) -> tuple[int, int]:
        """Values kept per full chunk and in the tail (0 when there is no tail)."""
        k_full = min(topk, self.size)
        k_tail = min(self.tail, max(1, math.ceil(topk * self.tail / self.size))) if self.tail else 0
        return k_full, k_tail

    def total_kept(self, topk: int) -> int:
        """Values kept over the whole tensor."""
        k_full, k_tail = self.kept(topk)
        return self.full * k_full + k_tail

    def split(self, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(full [n, size], tail [L])`` views/copies of ``tensor`` in chunk order."""
        if self.blocked:
            rows, cols = self.shape
            s = self.side
            blocks = tensor.reshape(rows // s, s, cols // s, s).permute(0, 2, 1, 3)
            return blocks.reshape(-1, self.size), tensor.new_zeros(0)
        flat = tensor.reshape(-1)
        cut = self.full * self.size
        return flat[:cut].reshape(self.full, self.size), flat[cut:]

    def join(self, full: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`split`: chunks back to a tensor of ``shape``."""
        if self.blocked:
            rows, cols = self.shape
            s = self.side
            blocks = full.reshape(rows // s, cols // s, s, s).permute(0, 2, 1, 3)
            return blocks.reshape(rows, cols)
        return torch.cat([full.reshape(-1), tail.reshape(-1)]).reshape(self.shape)

    def flat_positions(self, indices: torch.Tensor, k_full: int) -> torch.Tensor:
        """Row-major flat positions in the tensor of kept chunk-local ``indices`` (chunk order:
        ``k_full`` per full chunk, then the tail's), so sparse values can be added in place.

        Each position is its chunk's first position plus the index's offset inside a chunk:
        two tables a tensor's layout fixes, kept (``_tables``), so a reader adding hundreds of
        uploads a window pays one gather and one add per value."""
        starts, offsets = _tables(self, k_full, indices.numel())
        if indices.device.type == "cpu":  # numpy's take: half torch's gather here
            return torch.from_numpy(starts.numpy() + np.take(offsets.numpy(), indices.numpy()))
        return starts.to(indices.device) + offsets.to(indices.device)[indices]

    def chunk_starts(self, k_full: int, n: int) -> np.ndarray:
        """For ``n`` kept values (``k_full`` per full chunk), each value's chunk index times the
        chunk size: the chunk-major coordinate of a kept value is this plus its chunk-local
        index (kept per layout, as :meth:`flat_positions`' tables are)."""
        return _chunk_starts(self, k_full, n)


@functools.lru_cache(maxsize=512)
def _tables(layout: ChunkLayout, k_full: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``n`` kept values of ``layout`` (``k_full`` per full chunk): each value's chunk start
    in the flat tensor, and every chunk-local index's offset from its chunk's start."""
    chunk = torch.clamp(torch.arange(n) // max(k_full, 1), max=layout.full)
    local = torch.arange(layout.size)
    if not layout.blocked:
        return chunk * layout.size, local
    cols, s = layout.shape[1], layout.side
    grid_cols = cols // s
    starts = (chunk // grid_cols) * s * cols + (chunk % grid_cols) * s
    return starts, (local // s) * cols + local % s


@functools.lru_cache(maxsize=512)
def _chunk_starts(layout: ChunkLayout, k_full: int, n: int) -> np.ndarray:
    chunk = np.minimum(np.arange(n) // max(k_full, 1), layout.full)
    out = chunk * layout.size
    out.flags.writeable = False  # shared by every reader of this layout
    return out
