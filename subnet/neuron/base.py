"""``BaseNeuron``: the one loop every role runs, and the lifecycle around it.

The loop follows the chain block by block. When the current window reaches the role's phase
(its offset in blocks from the window start) and the window has not been handled yet, it syncs
the model, runs the role's step, publishes the result and saves state. Roles supply those steps
and nothing else; they never own a loop.

A failure inside one window (an outage, a refused upload, a chain hiccup) is logged with its
reason and the neuron goes on to the next window; the window is still marked handled so work
is never repeated after its deadline.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any

import bittensor as bt
import torch
from loguru import logger

from ..chain.errors import ChainSetupError
from ..storage.base import StorageError
from ..versions import PublishError, SyncError
from ..wire import Rejected
from .runtime import Runtime
from .state import StateFile

# Failures that cost one window, not the process.
WINDOW_ERRORS = (
    StorageError,
    Rejected,
    SyncError,
    PublishError,
    ChainSetupError,
    bt.BittensorError,  # the chain went away mid-window (e.g. restarting): the next block retries
    ConnectionError,
    TimeoutError,
    ArithmeticError,  # local training diverged (the miner resets and goes on)
)


class BaseNeuron(ABC):
    """A neuron: one loop, role-supplied steps, resumable state."""

    role: str = "neuron"

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.state_file = StateFile(rt.state_dir)
        self.last_window = -1
        self.stop_event = threading.Event()
        self.busy = False  # inside a window's work: a stop request waits for it to finish

    # Steps a role supplies ---------------------------------------------------------------------

    @abstractmethod
    def phase(self) -> tuple[int, int]:
        """``(first, last)`` offsets within a window at which this role's step may run."""

    def on_block(self, block: int, window: int, offset: int) -> None:  # noqa: B027
        """Called on every new block (cheap observations; default: nothing)."""

    @abstractmethod
    def sync(self, window: int) -> None:
        """Bring the model to the version this window works on."""

    @abstractmethod
    def step(self, window: int) -> Any:
        """The role's work for ``window``; returns what :meth:`publish` sends."""

    @abstractmethod
    def publish(self, window: int, result: Any) -> None:
        """Send the step's result (upload, report, model version)."""

    @abstractmethod
    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """What to save: a JSON record and named tensors."""

    @abstractmethod
    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""

    # The loop ------------------------------------------------------------------------------

    def run(self, max_windows: int | None = None) -> int:
        """Follow blocks and handle each window once at the role's phase; returns windows done."""
        self.resume()
        handled = 0
        first, last = self.phase()
        logger.info("{} running; phase offsets {}..{}", self.role, first, last)
        seen = -1
        # After a long step, go straight to the head: missed blocks need no handling.
        for block in self.rt.chain.follow_blocks(latest_only=True):
            if self.stop_event.is_set():
                break
            if block <= seen:
                continue
            seen = block
            window, offset = self.rt.clock.window(block), self.rt.clock.offset(block)
            if window < 0:
                continue
            try:
                self.on_block(block, window, offset)
            except Exception as error:  # observations are best effort; the window still runs
                logger.opt(exception=error).warning("{}: on_block failed", self.role)
            if window <= self.last_window or offset < first:
                continue
            if offset > last:
                logger.warning(
                    "{}: window {} missed (block {} past its phase)", self.role, window, block
                )
                self.last_window = window
                continue
            self.handle(window)
            handled += 1
            if max_windows is not None and handled >= max_windows:
                break
        logger.info("{} stopped after {} windows", self.role, handled)
        return handled

    def handle(self, window: int) -> None:
        """Sync, step, publish and save for one window; a window-level failure is logged."""
        self.busy = True
        try:
            self.sync(window)
            self.publish(window, self.step(window))
        except WINDOW_ERRORS as error:
            reason = getattr(error, "reason", type(error).__name__)
            logger.error("{}: window {} failed ({}): {}", self.role, window, reason, error)
            self.rt.metrics.log("window_failed", window=window, reason=str(reason))
        except Exception as error:  # a bug or a peer's data we did not foresee: log it, go on
            logger.opt(exception=error).error("{}: window {} failed (internal)", self.role, window)
            self.rt.metrics.log("window_failed", window=window, reason="internal")
        finally:
            self.busy = False
        self.last_window = window
        self.save()

    # Lifecycle -----------------------------------------------------------------------------

    def resume(self) -> None:
        """Load saved state, if any (a restart continues where it stopped)."""
        meta, tensors = self.state_file.load()
        if meta:
            self.last_window = int(meta.get("last_window", -1))
            self.restore(meta, tensors)
            logger.info("{} resumed after window {}", self.role, self.last_window)

    def save(self) -> None:
        """Persist state now."""
        meta, tensors = self.state()
        self.state_file.save({**meta, "last_window": self.last_window, "role": self.role}, tensors)

    def stop(self) -> None:
        """Ask the loop to stop: after the current window's work, or now when idle.

        Called from a signal handler. While the loop only waits for the next block (which never
        comes if the chain went away) it is interrupted at once; a window's work in progress is
        allowed to finish and be saved.
        """
        self.stop_event.set()
        if not self.busy:
            raise KeyboardInterrupt
