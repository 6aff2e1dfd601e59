"""The chunks of a model's tensors in one global order, and the Merkle commitment over them.

A miner commits to its private error feedback (a dense tensor per parameter) with one root: the
Merkle root (:mod:`subnet.verify.merkle`) over every chunk, where a chunk is what SparseLoCo's
top-k runs over (:class:`~subnet.compression.chunking.ChunkLayout`: a 64 x 64 block, or 4,096
values of a flattened tensor, the last one possibly shorter). Tensors come in sorted name order,
and within a tensor its full chunks, then its tail. A validator that draws a few chunks can then
be shown exactly those chunks' values, each proven against the root, without the rest.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import torch

from subnet.compression.chunking import ChunkLayout
from subnet.verify import merkle

FRESH = "fresh"  # the commitment of an error feedback that is all zeros (a new or restarted line)
_DOMAIN = b"beam-ef-chunk-v1\x00"


@dataclass(frozen=True)
class ChunkMap:
    """Where each global chunk lives: ``(tensor name, index within the tensor, length)``."""

    shapes: tuple[tuple[str, tuple[int, ...]], ...]
    side: int

    @classmethod
    def of(cls, shapes: Mapping[str, tuple[int, ...]], side: int) -> ChunkMap:
        """The chunks of tensors of ``shapes`` cut with block side ``side``."""
        return cls(tuple(sorted((n, tuple(s)) for n, s in shapes.items())), side)

    @cached_property
    def layouts(self) -> dict[str, ChunkLayout]:
        """Each tensor's chunk layout."""
        return {name: ChunkLayout.of(shape, self.side) for name, shape in self.shapes}

    @cached_property
    def refs(self) -> tuple[tuple[str, int, int], ...]:
        """``(name, index, length)`` of every chunk, in the global order."""
        out = []
        for name, _ in self.shapes:
            layout = self.layouts[name]
            out += [(name, i, layout.size) for i in range(layout.full)]
            if layout.tail:
                out.append((name, layout.full, layout.tail))
        return tuple(out)

    @property
    def n(self) -> int:
        """How many chunks there are."""
        return len(self.refs)

    def split(self, name: str, tensor: torch.Tensor) -> list[torch.Tensor]:
        """One tensor's chunks (flat, in chunk order)."""
        full, tail = self.layouts[name].split(tensor.detach().float().cpu())
        return [*full.unbind(0), *([tail] if tail.numel() else [])]

    def chunks(self, tensors: Mapping[str, torch.Tensor], ids: list[int]) -> list[torch.Tensor]:
        """The values of chunks ``ids`` of ``tensors`` (zeros for a missing tensor)."""
        wanted: dict[str, list[int]] = {}
        for i in ids:
            wanted.setdefault(self.refs[i][0], []).append(i)
        out: dict[int, torch.Tensor] = {}
        for name, group in wanted.items():
            tensor = tensors.get(name)
            if tensor is None:
                for i in group:
                    out[i] = torch.zeros(self.refs[i][2])
                continue
            parts = self.split(name, tensor)
            for i in group:
                out[i] = parts[self.refs[i][1]].clone()
        return [out[i] for i in ids]

    def leaf(self, i: int, values: torch.Tensor) -> bytes:
        """The leaf digest of chunk ``i`` holding ``values`` (little-endian fp32)."""
        name, index, _ = self.refs[i]
        head = _DOMAIN + name.encode() + b"\x00" + struct.pack("<I", index)
        return merkle.leaf_digest(
            head + values.float().contiguous().numpy().astype("<f4").tobytes()
        )

    def leaves(self, tensors: Mapping[str, torch.Tensor]) -> list[bytes]:
        """Every chunk's leaf digest, in the global order."""
        out, start = [], 0
        for name, _ in self.shapes:
            tensor = tensors.get(name)
            parts = (
                self.split(name, tensor)
                if tensor is not None
                else [torch.zeros(r[2]) for r in self.refs if r[0] == name]
            )
            out += [self.leaf(start + j, part) for j, part in enumerate(parts)]
            start += len(parts)
        return out

    def commit(self, tensors: Mapping[str, torch.Tensor]) -> str:
        """The hex root over ``tensors`` chunk by chunk; ``FRESH`` for no tensors at all."""
        if not tensors:
            return FRESH
        return merkle.root(self.leaves(tensors)).hex()

    @property
    def depth(self) -> int:
        """Sibling digests per proof."""
        return merkle.depth_for(self.n)

    def numel(self, ids: list[int]) -> int:
        """Values in chunks ``ids``."""
        return sum(self.refs[i][2] for i in ids)


def chunk_count(shapes: Mapping[str, tuple[int, ...]], side: int) -> int:
    """How many chunks a model of ``shapes`` has (without building the map's refs)."""
    total = 0
    for shape in shapes.values():
        layout = ChunkLayout.of(tuple(shape), side)
        total += layout.full + (1 if layout.tail else 0)
    return total


def sample_size(n: int, share: float) -> int:
    """Chunks a check reads: ``share`` of ``n``, at least one."""
    return max(1, min(n, math.ceil(n * share)))
