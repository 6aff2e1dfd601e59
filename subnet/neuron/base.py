"""``BaseNeuron``: the one loop every role runs, and the lifecycle around it.

The loop follows the clock tick by tick (chain blocks in subnet mode, wall-clock ticks in a
room). It runs the steps the run plan lists for this neuron's slot, in order, each in its phase
of the window and once its gates pass; roles supply the actions (a plain dict from the plan's
action names to methods) and nothing else. They never own a loop.

Before the first window a role sets itself up (the dataset, the model); what is not there yet
(``NotReady``: the holder has not published the dataset) is retried at later ticks, never
waited for inside a step. A failure inside one step (an outage, a refused upload, a chain
hiccup) is logged with its reason and the neuron goes on; the step is still marked done so work
is never repeated after its deadline.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from loguru import logger

from ..errors import NotReady, SetupError
from ..storage.base import StorageError
from ..topology import SlotPlan
from ..versions import PublishError, SyncError
from ..wire import Rejected
from .loop_records import late_step_warning, plan_record, step_record
from .runtime import Runtime
from .schedule import Schedule
from .state import StateFile, StateWriteError
from .steps import Action, Gate, Step, StepParams, StopRule

# Failures that cost one step, not the process.
WINDOW_ERRORS = (
    StorageError,
    Rejected,
    SyncError,
    PublishError,
    SetupError,  # the chain went away mid-window, for one
    ConnectionError,
    TimeoutError,
    ArithmeticError,  # local training diverged (the miner resets and goes on)
)
SETUP_RETRY_S = 5.0  # how often a neuron that is not ready yet tries again
SETUP_WAIT_S = 600.0  # how long it tries before giving up with the reason


class BaseNeuron(ABC):
    """A neuron: one loop over clock ticks, plan-driven steps, resumable state."""

    role: str = "neuron"  # the role class the plan's slots name
    actions: ClassVar[Mapping[str, Action]] = {}  # the plan's action names -> methods
    gates: ClassVar[Mapping[str, Gate]] = {}  # the plan's gate names -> gates
    stop_rules: ClassVar[Mapping[str, StopRule]] = {}  # the plan's stop rule names -> rules
    # action -> the type of its step's ``params`` (an action not named reads none: StepParams)
    params: ClassVar[Mapping[str, type[StepParams]]] = {}
    # A role's attributes, declared: ``saved`` ones go in its state file (``state``/``restore``),
    # ``rebuilt`` ones are handles, settings and caches built anew by ``__init__``/``setup``.
    # The save/restore test over every role fails on an attribute declared in neither.
    saved: ClassVar[tuple[str, ...]] = ()
    rebuilt: ClassVar[tuple[str, ...]] = ()
    LOOP: ClassVar[tuple[str, ...]] = (
        "rt",
        "slot",
        "state_file",
        "schedule",
        "stop_event",
        "busy",
        "ready",
        "setup_since",
        "next_setup",
    )

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.slot: SlotPlan = rt.slot_of(self.role)
        self.state_file = StateFile(rt.state_dir)
        self.schedule = Schedule(self.slot.steps, rt.windows, self.gates, self.role)
        self.stop_event = threading.Event()
        self.busy = False  # inside a step: a stop request waits for it to finish
        self.ready = False
        self.setup_since: float | None = None
        self.next_setup = 0.0

    # What a role supplies ------------------------------------------------------------------

    def setup(self) -> None:  # noqa: B027
        """Build what the steps need (dataset, model); raise ``NotReady`` to be retried later."""

    def observe(self, tick: int, window: int, offset: int) -> None:  # noqa: B027
        """Called on every new tick (cheap observations; default: nothing)."""

    def committed(self, window: int) -> list[str]:
        """Hotkeys whose uploads of ``window`` this member holds a commit for (gate
        ``revealed``; default: none, so a member that keeps no commits waits for none)."""
        return []

    def heldout_loss(self) -> float | None:
        """The held-out loss of the model this member holds (stop rule ``loss_below``;
        default: None, a member holding no model of its own)."""
        return None

    @abstractmethod
    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """What to save: a JSON record and named tensors."""

    @abstractmethod
    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""

    # The loop ------------------------------------------------------------------------------

    def run(self, max_windows: int | None = None) -> int:
        """Follow the clock and run each window's planned steps once; returns windows done."""
        # Ticks before a room run's origin are negative: they are ticks all the same (setup is
        # retried on them), so nothing is skipped as "seen" before the first tick arrives.
        handled, seen = 0, None
        steps = ", ".join(f"{s.action} ({s.phase})" for s in self.slot.steps)
        logger.info(
            "{} running slot {} of {}: {}", self.role, self.slot.name, self.rt.plan.ref, steps
        )
        self.log_plan()
        self.try_setup()
        for tick in self.rt.clock.ticks():
            if self.stop_event.is_set():
                break
            if seen is not None and tick <= seen:
                continue
            seen = tick
            if not self.ready and not self.try_setup():
                continue
            window, offset = self.rt.windows.window(tick), self.rt.windows.offset(tick)
            if window < 0:
                continue
            try:
                self.observe(tick, window, offset)
            except Exception as error:  # observations are best effort; the steps still run
                logger.opt(exception=error).warning("{}: observe failed", self.role)
            if self.advance(window, offset):
                handled += 1
                if max_windows is not None and handled >= max_windows:
                    break
                if self.finished():
                    logger.info(
                        "{}: the plan's stop rule is met after window {}",
                        self.role,
                        self.last_window,
                    )
                    break
        logger.info("{} stopped after {} windows", self.role, handled)
        return handled

    def log_plan(self) -> None:
        """One ``plan`` record: the topology, this member's slot and the plan's lanes (the run
        page draws the lanes and each slot's rounds from it)."""
        self.rt.metrics.log("plan", **plan_record(self.rt, self.slot, self.role))

    def finished(self) -> bool:
        """Whether the plan's stop rule says the run is over."""
        stop = self.rt.plan.stop
        return self.stop_rules[stop["rule"]](self, stop)

    @property
    def last_window(self) -> int:
        """Every step of this window and those before it is done (-1: none yet)."""
        return self.schedule.cursor.last_window

    @last_window.setter
    def last_window(self, window: int) -> None:
        self.schedule.cursor.last_window = window

    def advance(self, window: int, offset: int) -> bool:
        """Run or skip the steps of ``window`` due at ``offset`` (the schedule decides); True
        once a window's last step has run."""
        return self.schedule.tick(window, offset, self)

    def reread(self) -> None:
        """Refresh membership now; an outage is logged and the last roster kept."""
        try:
            self.rt.membership.refresh()
        except WINDOW_ERRORS as error:
            logger.warning(
                "{}: membership refresh failed, using the last roster: {}", self.role, error
            )

    def gate_ready(self, gate: str, step: Step) -> bool:
        """Whether ``gate`` passed for ``step``; a gate not checkable yet has not."""
        try:
            return bool(self.gates[gate].ready(self, step))
        except WINDOW_ERRORS as error:
            logger.debug("{}: gate {} not checkable yet: {}", self.role, gate, error)
            return False

    def handle(self, step: Step) -> object:
        """Run one step's action; a step-level failure is logged and counted, never raised."""
        self.busy = True
        started = time.perf_counter()
        try:
            return self.actions[step.action](self, step)
        except StateWriteError:
            raise  # a disk that refuses the state stops the neuron (one line, by the entry point)
        except WINDOW_ERRORS as error:
            reason = getattr(error, "reason", type(error).__name__)
            # A step its own role chose not to run (a miner too late to upload in time) is
            # news, not an error: ``log_level`` on the exception says so.
            level = getattr(error, "log_level", "ERROR")
            what = "failed" if level == "ERROR" else "not run"
            logger.log(level, "{}: {} {} ({}): {}", self.role, step, what, reason, error)
            self.rt.metrics.log(
                "window_failed", window=step.window, step=step.action, reason=str(reason)
            )
        except Exception as error:  # a bug or a peer's data we did not foresee: log it, go on
            logger.opt(exception=error).error("{}: {} failed (internal)", self.role, step)
            self.rt.metrics.log(
                "window_failed", window=step.window, step=step.action, reason="internal"
            )
        finally:
            self.busy = False
            self.timed(step, time.perf_counter() - started)
        return None

    def timed(self, step: Step, seconds: float) -> None:
        """One ``step`` record per step run: what it cost and the offsets it started and ended
        at (a local run sizes its windows from these). A step that ended past its phase says so
        in the log with the numbers: whoever waited for its output may have gone on without."""
        record = step_record(self.rt, self.role, step, seconds)
        self.rt.metrics.log("step", **record)
        late_step_warning(self.role, step, record, seconds)

    # Lifecycle -----------------------------------------------------------------------------

    def try_setup(self) -> bool:
        """Set up and resume once what the role needs is there; False (retry later) if not."""
        now = time.monotonic()
        if self.ready or now < self.next_setup:
            return self.ready
        self.setup_since = self.setup_since or now
        try:
            self.setup()
        except NotReady as why:
            if now - self.setup_since > SETUP_WAIT_S:
                raise SetupError(str(why)) from None
            logger.info("waiting: {}", why)
            self.next_setup = now + SETUP_RETRY_S
            self.reread()  # the missing piece may be a member's new commitment
            return False
        self.resume()
        self.ready = True
        return True

    def resume(self) -> None:
        """Load saved state, if any (a restart continues where it stopped)."""
        meta, tensors = self.state_file.load()
        if meta:
            self.schedule.cursor.load_state_dict(meta)
            self.restore(meta, tensors)
            logger.info("{} resumed after window {}", self.role, self.last_window)

    def save(self) -> None:
        """Persist state now (nothing before setup: there is nothing to save yet)."""
        if not self.ready:
            return
        meta, tensors = self.state()
        cursor = self.schedule.cursor.state_dict()
        record = {**meta, **cursor, "role": self.role, "plan": self.rt.plan.digest}
        self.state_file.save(record, tensors)

    def stop(self) -> None:
        """Ask the loop to stop: after the current step, or now when idle.

        Called from a signal handler. While the loop only waits for the next tick (which never
        comes if the chain went away) it is interrupted at once; a step in progress is allowed
        to finish and be saved.
        """
        self.stop_event.set()
        if not self.busy:
            raise KeyboardInterrupt
