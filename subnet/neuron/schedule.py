"""The schedule: which of a slot's steps is due at a tick, and what waits, lapses or is missed.

Pure: no clock, no storage, no role. It knows the slot's steps, the window's phases and the
gates' lapse offsets, and keeps the cursor (how far this window got); the loop
(``BaseNeuron.run``) hands it each new ``(window, offset)`` and a :class:`Hooks` that asks a
gate, runs a step, saves and re-reads membership. The rules, in plan order:

- a step waits until its phase opens and is missed once its phase is over;
- a step whose gates have not passed waits, until the gate's lapse offset (by default the last
  offset of the phase): then it runs anyway, logged;
- a step held by a condition (a gate that never lapses: ``granted``, ``first_round``) lets the
  steps after it in its phase run first, in their order (:meth:`Schedule.run_ahead`);
- one step runs per tick: the next looks at the clock afresh;
- membership is re-read once per window at an idle tick, or right before a step when the roster
  is older than the previous window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from loguru import logger

from ..clock import WindowClock
from ..topology import StepPlan
from .steps import Gate, Step


class Hooks(Protocol):
    """What the schedule asks of the loop (``BaseNeuron`` is one)."""

    def gate_ready(self, gate: str, step: Step) -> bool:
        """Whether ``gate`` passed for ``step`` (a gate not checkable yet: False)."""

    def handle(self, step: Step) -> object:
        """Run ``step``'s action (its failures are the loop's to contain)."""

    def save(self) -> None:
        """Persist the role's state and the cursor."""

    def reread(self) -> None:
        """Re-read membership now."""


@dataclass
class Cursor:
    """How far the schedule got: saved with the role, so a restart repeats no step."""

    last_window: int = -1  # every step of this window and those before is done
    window: int = -1  # the window of the step at ``index``
    index: int = 0  # the next step of ``window``
    ahead: frozenset[int] = field(default_factory=frozenset)  # steps of ``window`` run ahead
    refreshed: int = -1  # the window membership was last re-read for

    def state_dict(self) -> dict[str, Any]:
        """The record a state file keeps (``refreshed`` is not kept: a restart re-reads)."""
        cursor = [self.window, self.index]
        return {"last_window": self.last_window, "cursor": cursor, "ahead": sorted(self.ahead)}

    def load_state_dict(self, record: Mapping[str, Any]) -> None:
        """Load what :meth:`state_dict` made (an empty record: a fresh start)."""
        cursor = record.get("cursor") or [-1, 0]
        self.last_window = int(record.get("last_window", -1))
        self.window, self.index = int(cursor[0]), int(cursor[1])
        self.ahead = frozenset(int(i) for i in record.get("ahead", []))


class Schedule:
    """A slot's steps over the window's phases: :meth:`tick` runs what is due now."""

    def __init__(
        self,
        steps: Sequence[StepPlan],
        windows: WindowClock,
        gates: Mapping[str, Gate],
        label: str = "neuron",
    ) -> None:
        self.steps = tuple(steps)
        self.windows = windows
        self.gates = gates  # read at each check: a gate added later is found
        self.label = label  # who logs (the role)
        self.cursor = Cursor()

    def tick(self, window: int, offset: int, hooks: Hooks) -> bool:
        """Run or skip the steps of ``window`` due at ``offset``; True once a window's last
        step has run (a window whose steps were all missed does not count)."""
        c, n = self.cursor, len(self.steps)
        if window <= c.last_window:
            self.refresh(window, hooks)
            return False
        if c.window != window:
            c.window, c.index, c.ahead = window, 0, frozenset()
        while c.index < n:
            if c.index in c.ahead:  # ran ahead of a held step: done
                c.index += 1
                if c.index == n:
                    return self.close(window, hooks, True)
                continue
            step = Step(self.steps[c.index], window, offset)
            first, last = self.windows.phase(step.plan.phase)
            if offset < first:
                self.refresh(window, hooks)
                return False
            if offset > last:
                logger.warning(
                    "{}: step {} missed: offset {} is {} tick(s) past its phase (last offset "
                    "{}); this neuron was busy, or still starting, until then",
                    self.label,
                    step,
                    offset,
                    offset - last,
                    last,
                )
                c.index += 1
                continue
            if c.refreshed < window - 1:
                self.refresh(window, hooks)
            held = self.held_by(step, last, hooks)
            if held is not None:
                self.run_ahead(step, held, last, hooks)
                self.refresh(window, hooks)
                return False
            hooks.handle(step)
            c.index += 1
            if c.index < n:
                hooks.save()
                return False  # the next step looks at the clock afresh at the next tick
            return self.close(window, hooks, True)
        return self.close(window, hooks, False)

    def close(self, window: int, hooks: Hooks, done: bool) -> bool:
        """Mark ``window`` done and save; ``done``: its last step ran."""
        self.cursor.last_window = window
        hooks.save()
        return done

    def held_by(self, step: Step, last: int, hooks: Hooks) -> str | None:
        """The gate that holds ``step`` now, or None: every gate passed or lapsed (lapsed
        ones are logged, and the step runs anyway)."""
        for name in step.plan.gates:
            gate = self.gates[name]
            if hooks.gate_ready(name, step):
                continue
            lapse = gate.lapse(self.windows.cfg) if gate.lapse else last
            if step.offset < lapse:
                return name
            why = f"gate {name} ({gate.doc}) not passed by offset {step.offset}"
            logger.info("{}: {}; running {} anyway", self.label, why, step)
        return None

    def run_ahead(self, held: Step, gate_name: str, last: int, hooks: Hooks) -> None:
        """Let the steps after ``held`` in its phase go first while a condition holds it.

        A gate that never lapses (``granted``, ``first_round``) is a condition, not a wait:
        the held step may never run this window. The steps after it in the same phase do not
        depend on it (their order is kept among themselves), so they run now rather than be
        missed with it: a trainer of two models trains model B in a round it holds no grant of
        model A for. Any other gate keeps plan order.
        """
        gate, cfg, c = self.gates.get(gate_name), self.windows.cfg, self.cursor
        if gate is None or gate.lapse is None or gate.lapse(cfg) < cfg.blocks:
            return
        for index in range(c.index + 1, len(self.steps)):
            if self.steps[index].phase != held.plan.phase:
                return
            if index in c.ahead:
                continue
            step = Step(self.steps[index], held.window, held.offset)
            if self.held_by(step, last, hooks) is not None:
                return
            logger.info(
                "{}: {} runs ahead of {} (held by gate {})", self.label, step, held, gate_name
            )
            hooks.handle(step)
            c.ahead = c.ahead | {index}
            hooks.save()

    def refresh(self, window: int, hooks: Hooks) -> None:
        """Re-read membership once per window."""
        if self.cursor.refreshed != window:
            self.cursor.refreshed = window
            hooks.reread()
