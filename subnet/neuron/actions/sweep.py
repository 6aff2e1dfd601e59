"""Sweep fan-out (``fan_out``): which sweep point each worker trains, from a common baseline.

Workers (the writers of the gradient lanes, sorted) take the points in turn: worker ``i``
trains point ``i mod len(points)``, a pure function of the roster both sides compute
(``point_of``). Each point is its own model line: its versions live on the model lane's
sub-stream ``lane.pI`` (``point_stream``). ``fan_out`` publishes the common baseline (the
holder's version 0) as version 0 of every point's line and records the assignment (metric
``fan_out``); the holder's per-point ``merge`` and the ``final_merge`` are in
``subnet.neuron.points``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import NotReady
from ..context import SweepLead
from ..runtime import Runtime
from ..steps import Step
from .grants import trainers


def assign_points(workers: list[str], points: list[float]) -> dict[str, float]:
    """``hotkey -> sweep value``: worker ``i`` (sorted) gets ``points[i % len(points)]``."""
    if not points:
        raise ValueError("a sweep needs at least one point")
    return {hk: points[i % len(points)] for i, hk in enumerate(sorted(workers))}


def point_stream(lane: str, index: int) -> str:
    """The key space of point ``index``'s model on ``lane`` (``model.p0``, ``model.p1``, ...)."""
    return f"{lane}.p{int(index)}"


def point_of(rt: Runtime, params: Mapping[str, Any]) -> tuple[int, float] | None:
    """``(index, value)`` of the sweep point this member trains; None for a step with no points.

    NotReady while this member is not among the trainers (the assignment needs its place).
    """
    points = [float(p) for p in params.get("points", ())]
    if not points:
        return None
    workers = trainers(rt)
    if rt.hotkey not in workers:
        raise NotReady(f"{rt.hotkey} is not among the sweep's trainers yet")
    index = workers.index(rt.hotkey) % len(points)
    return index, points[index]


@dataclass
class FanOut:
    """The ``fan_out`` action's result."""

    window: int
    points: dict[str, float] = field(default_factory=dict)


def fan_out(holder: SweepLead, step: Step) -> FanOut:
    """Action: assign the points to the workers present and publish the common baseline as
    version 0 of every point's model line."""
    values = [float(p) for p in step.params.get("points", [])]
    points = assign_points(trainers(holder.rt), values)
    holder.points.start(values)
    holder.rt.metrics.log(
        "fan_out", window=step.window, points=points, streams=holder.points.streams()
    )
    return FanOut(step.window, points)
