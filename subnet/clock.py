"""The window clock: every neuron derives the same window from the chain's block number."""

from __future__ import annotations

from dataclasses import dataclass

from .config import WindowConfig


@dataclass(frozen=True)
class WindowClock:
    """Maps blocks to ``(window, offset)``; nothing else coordinates time between neurons."""

    cfg: WindowConfig

    def window(self, block: int) -> int:
        """The window containing ``block`` (-1 before the first window starts)."""
        if block < self.cfg.start_block:
            return -1
        return (block - self.cfg.start_block) // self.cfg.blocks

    def offset(self, block: int) -> int:
        """Blocks since the start of ``block``'s window."""
        return (block - self.cfg.start_block) % self.cfg.blocks

    def start(self, window: int) -> int:
        """The first block of ``window``."""
        return self.cfg.start_block + window * self.cfg.blocks
