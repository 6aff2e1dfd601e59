"""What an action, a gate or a stop rule may touch of the member it runs for, declared.

The loop hands each action, gate and stop rule the role it runs for; each one names here, as a
small ``Protocol``, exactly what it reads and writes of that member: its runtime always, and
per family the rest (a trainer's update of the window and its model, a holder's admitted
trainers, the line it advances now, its sweep points). A role satisfies these by what it
declares, so nothing outside a role looks into it by name (no ``getattr``/``setattr``), and
this module imports no role: the arrow runs from the roles to their contexts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from ..compression import Compressor
from ..data import TokenDataset
from ..topology import SlotPlan
from .merge_result import MergeResult
from .model_line import ModelLine
from .replica import Replica
from .runtime import Runtime
from .steps import Step
from .upload import Upload


class Member(Protocol):
    """Any member: its runtime (plan, roster, store, readers, metrics)."""

    @property
    def rt(self) -> Runtime:
        """The member's seams and plan."""
        ...


class Follower(Member, Protocol):
    """A member that follows a model lane (gate ``version_out``)."""

    def replica_of(self, step: Step) -> Replica:
        """The model ``step`` starts from."""
        ...


class Revealer(Member, Protocol):
    """A member that may hold commits on commit-reveal lanes (gate ``revealed``)."""

    def committed(self, window: int) -> list[str]:
        """Hotkeys whose uploads of ``window`` this member holds a commit for."""
        ...


class Stopping(Member, Protocol):
    """What a stop rule reads: how far the member is, and its model's held-out loss."""

    @property
    def last_window(self) -> int:
        """Every step of this window and those before it is done (-1: none yet)."""
        ...

    def heldout_loss(self) -> float | None:
        """The held-out loss of the model this member holds (None: it holds none)."""
        ...


class Trainer(Member, Protocol):
    """A trainer after its ``train`` step (``reduce``, ``mix``, a model published on a ring)."""

    trained: Upload | None  # this window's update
    trained_window: int  # the window it is for

    @property
    def replica(self) -> Replica:
        """The model line trained now."""
        ...

    @property
    def compressor(self) -> Compressor:
        """The codec of its updates."""
        ...

    def assigned(self, rule: str, window: int) -> Callable[[str], list[int]]:
        """``hotkey -> sample ids`` of ``window`` by data rule ``rule``."""
        ...


class Admitting(Member, Protocol):
    """A lead that admits trainers (``admit``) and grants them data (``grant_data``)."""

    admitted: list[str] | None  # the trainers ``admit`` let in (None: not run yet)

    @property
    def data(self) -> TokenDataset:
        """The run's dataset (its train split is what is granted)."""
        ...

    def reread(self) -> None:
        """Refresh membership now."""
        ...


class Consensing(Member, Protocol):
    """A consensus slot: the score reports it trusts (``consensus``)."""

    def trusted(self) -> set[str]:
        """Scorers whose reports count."""
        ...

    def reports(self, window: int, trusted: set[str]) -> dict[str, dict[str, float]]:
        """Each trusted scorer's scores of ``window``."""
        ...


class SweepLines(Protocol):
    """A holder's per-point model lines."""

    def start(self, values: list[float]) -> None:
        """Publish the common baseline as version 0 of every point."""
        ...

    def streams(self) -> dict[int, str]:
        """Point index -> the stream its versions are on."""
        ...

    def final_models(self) -> dict[str, dict[str, torch.Tensor]]:
        """Each point's final model, by the name it is merged under."""
        ...


class SweepLead(Member, Protocol):
    """A holder of sweep points (``fan_out``)."""

    @property
    def points(self) -> SweepLines:
        """Its per-point model lines."""
        ...


class PointHolder(Member, Protocol):
    """What a holder's sweep points (``points.Points``) advance through: its own line, the
    line it merges now (lent to a point meanwhile) and its merge and publication."""

    own: ModelLine  # the holder's own model line
    line: ModelLine  # the line merged and published now

    @property
    def slot(self) -> SlotPlan:
        """The slot it runs (its steps name the points)."""
        ...

    @property
    def data(self) -> TokenDataset:
        """The run's dataset (the vocabulary the points' models are built for)."""
        ...

    def step(self, window: int, senders: list[str] | None = None) -> MergeResult:
        """Merge ``window``'s uploads (from ``senders`` only) into the line merged now."""
        ...

    def publish(self, window: int, result: MergeResult) -> None:
        """Publish a merged window as the next version of the line merged now."""
        ...

    def publish_pending(self, result: MergeResult | None) -> None:
        """Publish the line's merge not yet published, if any."""
        ...


class Collector(SweepLead, Protocol):
    """A holder that merges final models into the line it advances (``final_merge``)."""

    @property
    def line(self) -> ModelLine:
        """The model line merged and published now."""
        ...

    def publish(self, window: int, result: MergeResult) -> None:
        """Publish a merged window as the next version of that line."""
        ...
