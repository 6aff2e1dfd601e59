"""A miner's window of training, on one model line: H inner steps, paced, compressed.

It starts from the line's replica (synced to the holder's version), trains the samples it is
given against the upload deadline (``pacer.py``: all steps, a credited prefix, or a skip),
computes ``start - end``, adds the line's error feedback and compresses. Steps taken and
abandoned leave the line's optimizer as it was; a diverged window (a NaN or infinite loss or
update) starts the line's training state over. What it returns says what was trained (the
prefix of the samples), the error feedback before and after (``Held``: what checks prove), and
the window's ``train`` record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from loguru import logger

from ..compression import Compressor, payload_nbytes
from ..data.dataset import TokenDataset
from ..monitor.progress import progress
from ..training import pseudo_gradient
from ..training.trainer import Trainer
from .answers import Held, chunk_map
from .lines import Line
from .pacer import Pacer
from .pacing import PacedResult
from .runtime import Runtime
from .state import load_optimizer_state, optimizer_state, optimizer_steps

# Windows after which a training state is not continued: the upload that committed to it may
# have expired from the bucket (docs/miner.md suggests 7 days: 1,680 six-minute windows).
MAX_STATE_AGE = 1000


class NonFinite(ArithmeticError):
    """Local training diverged (a NaN or infinite loss or update)."""

    reason = "non_finite"


@dataclass
class Trained:
    """One window's training of one line: what goes out, and what it says about itself."""

    window: int
    payload: dict[str, Any]  # the compressed pseudo-gradient
    held: Held  # the error feedback before and after, for answers to checks
    paced: PacedResult
    ids: list[int]  # the samples trained (the prefix the steps taken reached)
    carried: int  # inner steps the optimizer carried in (0 unless the plan keeps them)


def rewind(line: Line, moments: dict[str, torch.Tensor]) -> None:
    """Put the line's inner optimizer back to its ``moments`` before a window's training
    (none: a fresh optimizer, as every window starts with unless the plan keeps them)."""
    line.fresh_optimizer()
    if moments:
        groups, _ = optimizer_state(line.optimizer)
        load_optimizer_state(line.optimizer, groups, moments)


class WindowTraining:
    """Trains a line for a window (the module doc)."""

    def __init__(self, rt: Runtime, data: TokenDataset, trainer: Trainer, compressor: Compressor):
        self.rt = rt
        self.data = data
        self.trainer = trainer
        self.compressor = compressor

    def run(self, window: int, line: Line, pacer: Pacer, ids: list[int]) -> Trained:
        """Train ``line`` on the samples ``ids`` for ``window``, paced by ``pacer``; the update
        compressed with the line's error feedback (``WindowSkipped``, ``NonFinite``: nothing
        changed but a diverged line's state, started over)."""
        inner, replica = line.inner, line.replica
        start = replica.snapshot()
        before = self._continued(window, line)
        moments = optimizer_state(line.optimizer)[1] if line.keep_optimizer else {}
        carried = optimizer_steps(line.optimizer)  # 0 unless the plan keeps the inner state
        moments = {k: v.clone() for k, v in moments.items()}
        paced = self._paced(window, line, pacer, ids, moments)
        result = paced.result
        ids = ids[: result.steps * inner.micro_batch * inner.accumulation]  # trained prefix
        delta = pseudo_gradient(start, replica.model)
        if not math.isfinite(result.mean_loss) or not all(
            bool(d.isfinite().all()) for d in delta.values()
        ):
            # Diverged: uploading would only be rejected, and NaN moments would poison every
            # later window. Start the local optimizer and error feedback afresh instead.
            replica.reset()
            line.start_over(self.rt.cfg.protocol.compression.ef_decay)
            raise NonFinite(f"window {window}: loss {result.mean_loss}; optimizer state reset")
        payload, _ = line.ef.compress(self.compressor, delta)
        replica.reset()  # the next window starts from the global model, not ours
        source = line.state_window if before else None
        chunks = chunk_map(self.rt, {k: tuple(v.shape) for k, v in start.items()})
        held = Held.of(chunks, window, source, before, line.ef.state_dict())
        line.state_window = window
        logger.info(
            "window {}: {} steps, loss {:.4f}, {} bytes",
            window,
            result.steps,
            result.mean_loss,
            payload_nbytes(payload),
        )
        return Trained(window, payload, held, paced, ids, carried)

    def _continued(self, window: int, line: Line) -> dict[str, torch.Tensor]:
        """The line's error feedback the window continues: none where no upload committed to
        it (an older state file), or its upload may have expired from the bucket (the line
        starts over then: no check could prove it)."""
        before = line.ef.state_dict()
        if before and (line.state_window is None or window - line.state_window > MAX_STATE_AGE):
            line.start_over(self.rt.cfg.protocol.compression.ef_decay)
            return {}
        return before

    def _paced(
        self,
        window: int,
        line: Line,
        pacer: Pacer,
        ids: list[int],
        moments: dict[str, torch.Tensor],
    ) -> PacedResult:
        """Train against the deadline; on any way out but a result, the optimizer rewound."""
        inner = line.inner
        batches = progress(
            self.data.batches(ids, inner.micro_batch),
            desc=f"window {window}",
            total=inner.steps * inner.accumulation,
            unit="batch",
        )
        try:
            return pacer.train(
                window, line.replica, batches, line.optimizer, train=self.trainer.train, inner=inner
            )
        except BaseException:
            # Steps taken and abandoned (a skip, a failed read, a lost rank) must not change
            # the state the next upload says it continues.
            rewind(line, moments)
            raise

    def record(self, trained: Trained, line: Line, sync_seconds: float) -> dict[str, Any]:
        """The window's ``train`` record (logged once the update went out: its ``bytes_up``)."""
        result, inner = trained.paced.result, line.inner
        return dict(
            window=trained.window,
            steps=result.steps,
            tokens=result.tokens,
            loss=result.mean_loss,
            seconds=result.seconds,
            bytes=payload_nbytes(trained.payload),
            version=line.replica.version,
            sync_seconds=round(sync_seconds, 3),
            steps_assigned=inner.steps,
            stopped=trained.paced.stopped,
            model=line.stream,
            data_rule=line.data_rule,
            files=self.data.files_of(trained.ids),  # the data files its samples came from
            carried_steps=trained.carried,
            lr=inner.lr,
            weight_decay=inner.weight_decay,
        )
