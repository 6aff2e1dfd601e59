"""The miner's pacing shell: the pure rules of ``pacing.py`` wired to the chain and metrics.

``Pacer`` knows the window clock's deadline tick (the end of the ``upload`` phase), measures the
tick time (chain blocks in subnet mode) from the ticks the neuron sees (and the clock's ``now``,
read best effort), trains as much as fits before the
upload deadline (``train_paced``), skips the window with the numbers when not even the
protocol's minimum fits, and checks, after each upload, whether it landed late. Every decision
is a log line and a ``metrics.jsonl`` record (``window_skipped``, ``upload``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from loguru import logger
from torch.optim import Optimizer

from ..training.config import InnerConfig
from ..training.inner import Batch, InnerResult, train_inner
from .pacing import BlockTimer, Pace, PacedResult, explain, margin_s, train_paced
from .replica import Replica
from .runtime import Runtime


class WindowSkipped(TimeoutError):
    """This window's work cannot reach the upload deadline: skipped early, not uploaded late."""

    reason = "too_slow"
    log_level = "WARNING"  # a decision, not a failure: a room's first window is often short


class Pacer:
    """One miner's deadline, step and block timing, across windows."""

    def __init__(self, rt: Runtime, refresh_s: float = 2.0) -> None:
        self.rt = rt
        self.refresh_s = refresh_s  # re-read the chain head at most this often while training
        # Ticks are time only when the runtime says so (``tick_seconds``: a room's tick length;
        # a chain's nominal block time, measured within a few ticks); a test's manual clock has
        # no deadline in seconds.
        seconds = rt.tick_seconds
        self.active = seconds is not None
        self.blocks = BlockTimer(nominal_s=float(seconds or 12.0))
        self.pace = Pace()
        self.trained_at = 0.0  # perf_counter when the last training ended

    def observe(self, block: int) -> None:
        """A block (tick) the loop saw, now."""
        if self.active:
            self.blocks.observe(block, time.monotonic())

    def deadline_block(self, window: int) -> int:
        """The first tick at which an upload for ``window`` is late (the upload phase is over)."""
        return self.rt.windows.start(window) + self.rt.windows.phase("upload")[1] + 1

    def seconds_to_deadline(self, window: int) -> float:
        """Predicted seconds until the deadline block (re-reading the head now and then)."""
        if not self.active:
            return math.inf
        now = time.monotonic()
        if not self.blocks.seen or now - self.blocks.seen[-1][1] > self.refresh_s:
            self._observe_head()  # corrects a drifting block time
        return self.blocks.seconds_until(self.deadline_block(window), now)

    def _observe_head(self) -> None:
        """Note the chain head now; best effort (the last observation extrapolates meanwhile)."""
        try:
            self.observe(self.rt.clock.now())
        except Exception as error:  # noqa: BLE001 - best effort: the last observation extrapolates
            logger.debug("clock unreadable while pacing: {}", error)

    def train(
        self,
        window: int,
        replica: Replica,
        batches: Iterable[Batch],
        optimizer: Optimizer,
        train: Callable[..., InnerResult] = train_inner,
        inner: InnerConfig | None = None,
    ) -> PacedResult:
        """Train as many steps as fit before the upload deadline, or raise WindowSkipped.

        ``train`` runs one chunk of steps (``train_inner``, or a torchrun trainer's ``train``);
        ``inner`` is the step's inner settings (the plan may set H), the protocol's by default.
        """
        inner = inner or self.rt.cfg.protocol.inner
        self._observe_head()
        left = self.seconds_to_deadline(window)
        if not math.isfinite(left):  # no deadline in seconds (a manual clock, an unread head)
            paced = train_paced(
                replica.model,
                batches,
                inner,
                optimizer,
                steps=inner.steps,
                pace=self.pace,
                seconds_left=lambda: math.inf,
                train=train,
            )
            self.trained_at = time.perf_counter()
            return paced
        margin = margin_s(left, self.blocks.seconds_per_block())
        reserve = margin + (self.pace.tail_s or 0.0)
        if left - reserve > 0:  # some time: train, probing the step time first
            paced = train_paced(
                replica.model,
                batches,
                inner,
                optimizer,
                steps=inner.steps,
                pace=self.pace,
                seconds_left=lambda: self.seconds_to_deadline(window) - reserve,
                train=train,
            )
            self.trained_at = time.perf_counter()  # from here: pseudo-gradient, compress, upload
            if paced.stopped == "deadline":
                logger.warning(
                    "window {}: trained {} of {} steps to upload in time ({})",
                    window,
                    paced.result.steps,
                    inner.steps,
                    explain(left, self.pace, margin),
                )
            if paced.stopped != "abandoned":
                return paced
            replica.reset()  # the steps taken are discarded with the window
        raise self._skipped(window, inner, left, margin)

    def _skipped(
        self, window: int, inner: InnerConfig, left: float, margin: float
    ) -> WindowSkipped:
        """Log the ``window_skipped`` record, with the numbers; the error for ``train`` to raise."""
        detail = (
            f"even {inner.least_steps()} steps (the protocol's minimum) would be late: "
            f"{explain(self.seconds_to_deadline(window), self.pace, margin)}"
        )
        self.rt.metrics.log(
            "window_skipped",
            window=window,
            reason="too_slow",
            detail=detail,
            seconds_left=round(left, 3),
            step_seconds=self.pace.step_s,
            block_seconds=round(self.blocks.seconds_per_block(), 3),
        )
        return WindowSkipped(f"skipped rather than upload late: {detail}")

    def uploaded(self, window: int) -> None:
        """Record how the upload landed against the deadline; warn, with numbers, if late."""
        if not self.active:
            return
        upload_seconds = time.perf_counter() - self.trained_at
        self.pace.observe_tail(upload_seconds)
        try:
            block = self.rt.clock.now()
        except Exception as error:  # noqa: BLE001 - the upload is done; only the check is lost
            logger.warning(
                "window {}: chain head unreadable, lateness not checked: {}", window, error
            )
            return
        self.observe(block)
        deadline = self.deadline_block(window)
        early = self.blocks.seconds_until(deadline, time.monotonic())
        late = block >= deadline
        self.rt.metrics.log(
            "upload",
            window=window,
            block=block,
            deadline_block=deadline,
            seconds_to_deadline=round(early, 3),
            late=late,
            upload_seconds=round(upload_seconds, 3),
            step_seconds=self.pace.step_s,
            block_seconds=round(self.blocks.seconds_per_block(), 3),
        )
        if late:
            logger.warning(
                "window {}: upload landed at block {}, {} block(s) after the upload deadline "
                "(block {}): validators score it late (0). Steps take {:.2f} s, compress and "
                "upload {:.1f} s, blocks {:.2f} s",
                window,
                block,
                block - deadline + 1,
                deadline,
                self.pace.step_s or 0.0,
                upload_seconds,
                self.blocks.seconds_per_block(),
            )
