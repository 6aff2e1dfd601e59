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

from pydantic import BaseModel, ConfigDict

from ..config import WindowConfig
from ..topology import StepPlan

# role instance, step -> typed result (Upload, ScoreReport, MergeResult ...); each action types
# the role as the context it declares (``context.py``), so the registry takes any role
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


class StepParams(BaseModel):
    """A step's ``params`` table, typed: an action registers a subclass naming what it reads.

    ``extra="forbid"``: the plan compiler refuses a key no field names (a misspelling in a
    topology file), and a value of the wrong type, before anything runs. An action that reads
    nothing takes this class itself: any key is an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


class TrainParams(StepParams):
    """``train``: H, whether AdamW's moments carry over, the model line, a sweep, the data."""

    inner_steps: int | None = None  # H for this step (and every reader's receipt check)
    keep_optimizer: bool = False  # keep the inner optimizer's moments across rounds
    model: str | None = None  # a label for the model line (two models from one trainer)
    sweep_key: str | None = None  # the inner setting a sweep varies (``inner.NAME``)
    points: list[float] | None = None  # the sweep's values of it, one per point
    prefix: str | None = None  # the data prefix the trainer reads shards under


class MixParams(StepParams):
    """``mix``: the predecessor's weight in the mix."""

    weight: float = 0.5


class ReduceParams(StepParams):
    """``reduce``: the tree's fanout (else the aggregation's ``tree_fanout``, else 2)."""

    fanout: int | None = None


class MergeParams(StepParams):
    """``merge``: merge each sweep point's workers into that point's model."""

    per_point: bool = False


class FanOutParams(StepParams):
    """``fan_out``: the sweep's points (as the trainers' ``train`` step names them)."""

    points: list[float] = []


class GrantParams(StepParams):
    """``grant_data``: the data units each admitted trainer is granted per round."""

    units: int = 1
