"""The window clock: every neuron derives the same window from the same tick number.

Pure arithmetic over ticks (chain blocks in subnet mode, wall-clock ticks in a room): nothing
here reads a clock. A window's offsets are split into three phases, in order: ``upload``
``[0, upload_deadline)``, ``score`` ``[upload_deadline, report_deadline)`` and ``merge``
``[report_deadline, blocks)``; a run plan's steps name the phase they run in. On a commit-reveal
lane the writers reveal in the ``reveal`` phase, ``[upload_deadline + 2, report_deadline)``:
inside the score phase, after the deadline tick on which the readers close their snapshot of the
commits and one guard tick (a reader's chain node may lag a writer's by a block).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import WindowConfig

PHASES = ("upload", "reveal", "score", "merge")


@dataclass(frozen=True)
class WindowClock:
    """Maps ticks to ``(window, offset)``; nothing else coordinates time between neurons."""

    cfg: WindowConfig

    def window(self, tick: int) -> int:
        """The window containing ``tick`` (-1 before the first window starts)."""
        if tick < self.cfg.start_block:
            return -1
        return (tick - self.cfg.start_block) // self.cfg.blocks

    def offset(self, tick: int) -> int:
        """Ticks since the start of ``tick``'s window."""
        return (tick - self.cfg.start_block) % self.cfg.blocks

    def start(self, window: int) -> int:
        """The first tick of ``window``."""
        return self.cfg.start_block + window * self.cfg.blocks

    def phase(self, name: str) -> tuple[int, int]:
        """``(first, last)`` offsets of phase ``name`` (``upload``, ``reveal``, ``score`` or
        ``merge``)."""
        c = self.cfg
        spans = {
            "upload": (0, c.upload_deadline - 1),
            "reveal": (c.upload_deadline + 2, c.report_deadline - 1),
            "score": (c.upload_deadline, c.report_deadline - 1),
            "merge": (c.report_deadline, c.blocks - 1),
        }
        if name not in spans:
            raise ValueError(f"unknown phase {name!r}; phases are {', '.join(PHASES)}")
        return spans[name]
