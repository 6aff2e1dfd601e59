"""Steps: the named actions a role runs each window, as the run plan lists them.

A role class registers its actions in a plain dict (``Miner.actions = {"train": Miner.train}``);
the plan's ``StepPlan.action`` names one of them, its ``phase`` says when in the window it may
run, its ``gates`` what must be true first, its ``lane`` where the result goes. An action takes
the role and a :class:`Step` and returns a typed result (a dataclass of the role's module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import WindowConfig
from ..topology import StepPlan

# role instance, step -> typed result (Upload, ScoreReport, MergeResult ...)
Action = Callable[[Any, "Step"], object]


@dataclass(frozen=True)
class Step:
    """One planned step, due now: the plan's entry, the window it runs for, the current offset."""

    plan: StepPlan
    window: int
    offset: int

    @property
    def action(self) -> str:
        """The action's registry name."""
        return self.plan.action

    @property
    def lane(self) -> str | None:
        """The lane the step writes, if any."""
        return self.plan.lane

    @property
    def params(self) -> Mapping[str, Any]:
        """The step's parameters (template values substituted)."""
        return self.plan.params

    def __str__(self) -> str:
        return f"{self.plan.action}@{self.window}"


@dataclass(frozen=True)
class Gate:
    """A named condition; ``lapse(window cfg)``: the offset from which the step runs without it."""

    name: str
    ready: Callable[[Any, Step], bool]  # (role, step) -> passed?
    lapse: Callable[[WindowConfig], int] | None = None  # None: the phase's last offset
    doc: str = ""


def never(cfg: WindowConfig) -> int:
    """A lapse offset no tick reaches: the step does not run unless the gate passes."""
    return cfg.blocks


# When a run ends, asked by the loop after each window: (role, [stop] table) -> stop now?
StopRule = Callable[[Any, Mapping[str, Any]], bool]
