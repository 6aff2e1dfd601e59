"""The persistence guard: no sender pushes one chunk in one direction much longer than others do.

A check replays a window on a sample of chunks, so a lie confined to a few chunks is rarely read;
repeated window after window in one direction (a fixed bias on a few embedding rows) it would
still move those coordinates far, because each window's merge adds it again. Honest senders do
not do that: their top-k positions move as their error feedback empties, and what they push
persistently (the true gradient) every honest sender pushes too.

So the holder keeps, per sender and per codec chunk, a decayed sum of the sender's updates,
``y_ic <- decay x y_ic + f_ic x u_ic``, as a count sketch (a secret random projection of each
chunk to ``dims`` numbers, so nobody can aim a lie at its blind spots). Before a window is
merged, each merged sender's chunk is scaled by the largest ``f_ic`` in ``[0, 1]`` that keeps
``|| decay x y_ic + f_ic x u_ic ||`` within ``ratio`` times the median of the same over the
window's merged senders (taken unscaled). An honest sender sits near that median and is
rarely touched; one that keeps pushing a chunk alone reaches the bound and from then on adds
only what decays, ``(1 - decay) x ratio x m_c`` a window, where ``m_c`` is the median
sender's persistent push on the chunk.

What a lie on a few chunks can still move, per chunk, over ``T`` windows: at most ``ratio``
times what the median honest sender persistently pushes there, weighted by its merge weight
``w``: with ``n`` honest senders pushing noise (a random walk), about ``ratio / sqrt(n)`` of
the chunk's honest movement; where they push a common direction, ``ratio / n`` of it. ``G``
hotkeys sharing one lie add ``G`` times that, until they are the median (more than half of
the merged senders). The sketch is the holder's own (``state_dict``); its cost is one decode of
each merged upload and ``dims`` numbers per sender and chunk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch

from subnet.compression.chunking import ChunkLayout

Update = Mapping[str, torch.Tensor]


class PersistenceGuard:
    """Per sender and chunk, a decayed sketch of its pushes; scales the chunks that persist
    far beyond the median sender's (module doc)."""

    def __init__(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        side: int,
        dims: int = 16,
        decay: float = 0.95,
        ratio: float = 2.0,
        seed: int | None = None,
    ) -> None:
        """``side``: the codec's chunk side (its chunks are the guard's); ``seed``: the secret
        sketch (random unless given; kept in ``state_dict``)."""
        self.layouts = {name: ChunkLayout.of(tuple(s), side) for name, s in sorted(shapes.items())}
        self.dims, self.decay, self.ratio = dims, decay, ratio
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(8), "big") >> 1
        self.memory: dict[str, torch.Tensor] = {}  # sender -> [chunks, dims]
        self._projection()

    def _projection(self) -> None:
        size = max((layout.size for layout in self.layouts.values()), default=1)
        g = torch.Generator().manual_seed(self.seed)
        self.signs = torch.randint(0, 2, (size,), generator=g).float() * 2 - 1
        self.buckets = torch.randint(0, self.dims, (size,), generator=g)

    @property
    def chunks(self) -> int:
        """Chunks over the whole model."""
        return sum(layout.full + (1 if layout.tail else 0) for layout in self.layouts.values())

    def sketch(self, update: Update) -> torch.Tensor:
        """``[chunks, dims]``: each chunk of ``update`` projected by the secret count sketch."""
        rows = []
        for name, layout in self.layouts.items():
            full, tail = layout.split(update[name].detach().float().cpu())
            if layout.full:
                rows.append(self._project(full.reshape(layout.full, layout.size)))
            if layout.tail:
                rows.append(self._project(tail.reshape(1, -1)))
        return torch.cat(rows) if rows else torch.zeros(0, self.dims)

    def _project(self, chunks: torch.Tensor) -> torch.Tensor:
        width = chunks.shape[1]
        out = torch.zeros(chunks.shape[0], self.dims)
        return out.index_add_(1, self.buckets[:width], chunks * self.signs[:width])

    def factors(self, sketches: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per merged sender, ``[chunks]`` factors in ``[0, 1]`` for this window's updates
        (``sketches``: each merged sender's ``sketch``), and the memory moved on by what is
        merged. With fewer than 3 senders there is no median to hold one to: all 1."""
        if len(sketches) < 3:
            for hk in self.memory.keys() - sketches.keys():
                self.memory[hk] = self.memory[hk] * self.decay
            for hk, s in sketches.items():
                self.memory[hk] = self._old(hk, s) + s
            return {hk: torch.ones(s.shape[0]) for hk, s in sketches.items()}
        for hk in self.memory.keys() - sketches.keys():  # not merged this window: decays
            self.memory[hk] = self.memory[hk] * self.decay
        olds = {hk: self._old(hk, s) for hk, s in sketches.items()}
        pushes = torch.stack([(olds[hk] + s).norm(dim=1) for hk, s in sketches.items()])
        bound = self.ratio * pushes.median(dim=0).values
        out = {}
        for hk, s in sketches.items():
            f = _largest_within(olds[hk], s, bound)
            out[hk] = f
            self.memory[hk] = olds[hk] + f[:, None] * s
        return out

    def transforms(
        self, payloads: Mapping[str, Any], decode: Callable[[Any], Update]
    ) -> tuple[list[Callable[[Update], dict[str, torch.Tensor]] | None], dict[str, list]]:
        """One window: each merged payload's sketch (decoded one at a time), its factors, and
        per payload a transform that scales its chunks (None for one kept whole); with what
        was held back, ``sender -> [chunks scaled, smallest factor]``."""
        factors = self.factors({hk: self.sketch(decode(p)) for hk, p in payloads.items()})
        held = {hk: f for hk, f in factors.items() if bool((f < 1).any())}
        out = [partial(self.scale, f=held[hk]) if hk in held else None for hk in payloads]
        summary = {hk: [int((f < 1).sum()), round(float(f.min()), 4)] for hk, f in held.items()}
        return out, summary

    def _old(self, hotkey: str, like: torch.Tensor) -> torch.Tensor:
        old = self.memory.get(hotkey)
        if old is None or old.shape != like.shape:
            return torch.zeros_like(like)
        return old * self.decay

    def forget(self, keep: set[str]) -> None:
        """Drop the memory of senders not in ``keep`` (no longer in the roster)."""
        self.memory = {hk: m for hk, m in self.memory.items() if hk in keep}

    def scale(self, update: Update, f: torch.Tensor) -> dict[str, torch.Tensor]:
        """``update`` with each chunk multiplied by its factor in ``f`` (chunk order)."""
        out, i = {}, 0
        for name, layout in self.layouts.items():
            n = layout.full + (1 if layout.tail else 0)
            factors, i = f[i : i + n], i + n
            if bool((factors == 1).all()):
                out[name] = update[name]
                continue
            full, tail = layout.split(update[name].float())
            full = full * factors[: layout.full, None]
            tail = tail * factors[layout.full] if layout.tail else tail
            out[name] = layout.join(full, tail).to(update[name].dtype)
        return out

    def state_dict(self) -> dict[str, Any]:
        """The secret sketch's seed and every sender's memory."""
        return {"seed": self.seed, "memory": {hk: m.clone() for hk, m in self.memory.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.seed = int(state["seed"])
        self._projection()
        self.memory = {hk: torch.as_tensor(m).float() for hk, m in state["memory"].items()}


def _largest_within(old: torch.Tensor, new: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Per row, the largest ``f`` in ``[0, 1]`` with ``||old + f new|| <= bound``, 0 if none.

    ``||old + f new||^2 - bound^2`` is ``a f^2 + 2 b f + c``, within between its roots: a
    sender beyond the bound may still push back toward zero (``b < 0``), never further out."""
    a = (new * new).sum(dim=1)
    b = (old * new).sum(dim=1)
    c = (old * old).sum(dim=1) - bound * bound
    disc = b * b - a * c
    root = disc.clamp(min=0).sqrt()
    safe = a.clamp(min=1e-30)
    low, high = (-b - root) / safe, (-b + root) / safe
    f = torch.where((disc < 0) | (high < 0) | (low > 1), torch.zeros_like(a), high.clamp(max=1))
    return torch.where(a > 0, f, torch.ones_like(a))
