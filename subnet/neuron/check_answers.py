"""A miner's answers to checks: the error feedback of its recent uploads, and the answers it
writes for the ones a validator names (``answers.py``).

Each upload's states (before and after its window: ``Held``) are kept ``KEEP`` windows, in the
state file (``held:<lane>:<window>:before/...`` and ``...:after/...``). An upload is answered
once revealed, after its window's guard tick, when a validator's notice names it and the
window's beacon is stored; a failed write is tried again at the next tick.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from loguru import logger

from ..storage.base import StorageError
from .answers import KEEP, Held, beacon, named_by, write_answer
from .replay_claim import ReplayClaim
from .runtime import Runtime

HELD = "held"  # the state file's prefix of held states


class AnswerBook:
    """Recent uploads' states by (lane, window), each with its model line's stream."""

    def __init__(self, rt: Runtime, save: Callable[[], None]) -> None:
        self.rt = rt
        self.save = save
        self.held: dict[tuple[str, int], tuple[str, Held]] = {}

    def keep(self, lane: str, window: int, stream: str, held: Held) -> None:
        """Keep an upload's states for the answers to checks of it."""
        self.held[(lane, window)] = (stream, held)

    def drop(self, lane: str, window: int) -> tuple[str, Held] | None:
        """Forget an upload's states (it was never revealed); what was kept, if anything."""
        return self.held.pop((lane, window), None)

    def answer(
        self, window: int, offset: int, unrevealed: Callable[[str, int], bool], claim: ReplayClaim
    ) -> None:
        """Answer the checks validators named this miner for: each held upload once revealed,
        after the guard tick, until ``KEEP`` windows have passed. The notices read tell the
        ``claim`` who covers its class."""
        self.held = {k: h for k, h in self.held.items() if k[1] >= window - KEEP}
        guard = self.rt.cfg.protocol.window.upload_deadline + 1
        for (lane, held_window), (_, held) in self.held.items():
            if held.answered or unrevealed(lane, held_window):
                continue
            if held_window == window and offset <= guard:
                continue
            named = named_by(self.rt, held_window, held, claim.coverage)
            claim.tell()
            if named:
                self._answer(lane, held_window, held)

    def _answer(self, lane: str, window: int, held: Held) -> None:
        """Write the answer to a check of ``held``, the upload of ``window`` (none yet without
        the window's beacon)."""
        draw = beacon(self.rt, window)
        if draw is None:
            return  # no pulse stored yet, or the chain did not answer: tried again next tick
        shapes = {k: tuple(v.shape) for k, v in held.after.items()}
        try:
            written = write_answer(self.rt, lane, held, draw, shapes)
        except StorageError as error:
            logger.warning(
                "window {}: writing the answer to a check failed ({}); trying again next tick",
                window,
                error.reason,
            )
            return
        held.answered = True
        logger.info("window {}: this upload is checked; wrote its answer", window)
        # What checks cost this miner, apart from its uploads (the run page's own line)
        self.rt.metrics.log("answered", window=window, lane=lane, bytes=written)
        self.save()

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """``held``: each upload's record, its states as ``held:<lane>:<window>`` tensors."""
        records: list[dict[str, Any]] = []
        tensors: dict[str, torch.Tensor] = {}
        for (lane, window), (stream, held) in self.held.items():
            records.append({"lane": lane, "stream": stream, **held.record()})
            tensors |= held.tensors(f"{HELD}:{lane}:{window}")
        return {"held": records}, tensors

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state_dict` saved (protocol 5 kept a dict: dropped)."""
        self.held = {}
        saved = meta.get("held", [])
        for m in saved if isinstance(saved, list) else []:
            held = Held.load(m, tensors, f"{HELD}:{m['lane']}:{m['window']}")
            self.held[(str(m["lane"]), held.window)] = (str(m["stream"]), held)
