"""Attackers that read the checks' docs and try to stay out of them (the adversarial
benchmark's; never part of ``subnet/``): a lie kept to a few chunks, hotkeys that answer their
checks late to hold the newcomers' draw, and a miner that turns once it is verified."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.attack_base import Attacker  # noqa: E402
from benchmarks.poisoners import SubtlePoisoner, _Transform  # noqa: E402
from subnet.compression.chunking import ChunkLayout  # noqa: E402
from subnet.neuron.miner import Upload  # noqa: E402

NARROW_CHUNKS = 3  # chunks of the embedding the narrow liar lies in


def embedding(shapes: dict[str, tuple[int, ...]]) -> str:
    """The token embedding: the tensor with the most rows (the vocabulary)."""
    return max(sorted(shapes), key=lambda n: (len(shapes[n]) == 2, shapes[n][0]))


def narrow_targets(
    hotkey: str, shapes: dict[str, tuple[int, ...]], side: int
) -> tuple[str, torch.Tensor, torch.Tensor]:
    """What the narrow liar of ``hotkey`` pushes: ``(tensor, flat positions, signs)``, the
    ``topk``-sized support of ``NARROW_CHUNKS`` chunks of the embedding, fixed for good (a pure
    function, so the benchmark measures the same coordinates)."""
    name = embedding(shapes)
    layout = ChunkLayout.of(shapes[name], side)
    seed = int.from_bytes(hashlib.sha256(f"narrow:{hotkey}".encode()).digest()[:8], "big") >> 1
    g = torch.Generator().manual_seed(seed)
    chunks = torch.randperm(layout.full, generator=g)[:NARROW_CHUNKS]
    marker = torch.zeros(layout.full, layout.size)
    for c in chunks.tolist():
        positions = torch.randperm(layout.size, generator=g)[:side]  # one value per row's worth
        marker[c, positions] = torch.randint(0, 2, (side,), generator=g).float() * 2 - 1
    tail = torch.zeros(layout.tail)
    flat = layout.join(marker, tail).reshape(-1)
    where = flat.nonzero().squeeze(1)
    return name, where, flat[where]


class NarrowLiar(_Transform):
    """Honest everywhere but in ``NARROW_CHUNKS`` chunks of the token embedding, where it sends
    one fixed direction every window at about the tensor's largest honest magnitude. Its error
    feedback stays honest: a check that reads one of those chunks finds it out, and one check
    reads a given chunk with probability about ``check_chunks``."""

    def transform(self, delta, window):
        side = self.rt.cfg.protocol.compression.chunk
        shapes = {k: tuple(v.shape) for k, v in delta.items()}
        name, where, signs = narrow_targets(self.rt.hotkey, shapes, side)
        out = dict(delta)
        flat = delta[name].clone().reshape(-1)
        layout = ChunkLayout.of(shapes[name], side)
        level = float(delta[name].abs().max())
        # Clear the chunks it lies in, then the fixed direction: the codec keeps exactly it
        lie = torch.zeros_like(flat)
        lie[where] = 1.0
        chunks, tail = layout.split(lie.reshape(shapes[name]))
        hit = chunks.abs().sum(dim=1) > 0
        full, rest = layout.split(flat.reshape(shapes[name]))
        full = full.clone()
        full[hit] = 0.0
        flat = layout.join(full, rest).reshape(-1)
        flat[where] = level * signs
        out[name] = flat.reshape(shapes[name])
        return out


class Turncoat(SubtlePoisoner):
    """Honest until a validator names it for a check (a newcomer's first checks come soon, and
    a check of an honest window passes), then, two windows later, the subtle poisoner for
    good: the first verified miner of a network takes the merge with it if nothing caps it."""

    turned_at: int | None = None

    def transform(self, delta, window):
        if self.turned_at is None or window < self.turned_at:
            return delta
        return super().transform(delta, window)

    def answer_checks(self, window: int, offset: int) -> None:
        super().answer_checks(window, offset)
        answered = [k[1] for k, (_, held) in self.held.items() if held.answered]
        if self.turned_at is None and answered:
            self.turned_at = min(answered) + 2
            self.rt.metrics.log("turned", window=self.turned_at)


class LateAnswerer(Attacker):
    """Trains honestly, joins ``join`` windows after it starts, and answers every check one
    window late, inside ``check_grace``: it stays a newcomer as long as it can, to hold the
    newcomers' places of the draw (before the split draw, every place)."""

    join = 0
    first: int | None = None

    def step(self, window: int) -> Upload | None:
        if self.first is None:
            self.first = window
        if window < self.first + self.join:
            return None
        return super().step(window)

    def answer_checks(self, window: int, offset: int) -> None:
        late = {k: v for k, v in self.held.items() if k[1] < window}
        now = {k: v for k, v in self.held.items() if k[1] >= window}
        self.held = late
        try:
            super().answer_checks(window, offset)
        finally:
            self.held = {**self.held, **now}


def late_answerers(count: int = 8) -> dict[str, type[Attacker]]:
    """``count`` late answerers joining in pairs, two windows apart."""
    return {
        f"late_answerer_{i}": type(f"LateAnswerer{i}", (LateAnswerer,), {"join": 2 * (i // 2)})
        for i in range(count)
    }


# A GPU class no validator of the benchmark covers (they run on CPUs)
GPU_CLAIM = "cuda-sm90-nvidia-h100-80gb-hbm3-cu12.8/bf16/torch2.13.0-cu128"


class ClassClaimer(SubtlePoisoner):
    """The subtle poisoner, saying it trained in a GPU class no validator covers: never
    checked, so it hopes to be paid unchecked (``pay_unverified``) or at least never banned."""

    def setup(self) -> None:  # noqa: D102
        super().setup()
        self.replay_class = GPU_CLAIM


class ClassFlipper(SubtlePoisoner):
    """The subtle poisoner, flipping between the pinned CPU class and a GPU class every window:
    each draw goes by its last upload's class, so a check named for it meets the other one."""

    def step(self, window: int) -> Upload:  # noqa: D102
        if window % 2 == 0:
            self.replay_class = GPU_CLAIM
        else:
            self.replay_class = None  # stated afresh: this machine's own class
        return super().step(window)
