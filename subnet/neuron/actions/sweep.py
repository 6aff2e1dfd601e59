"""Sweep fan-out (``fan_out``): which sweep point each worker trains, from a common baseline.

Workers (the writers of the gradient lanes, sorted) take the points in turn: worker ``i``
trains point ``i mod len(points)``. The first round's version is the common baseline every
point starts from. The action records the assignment (metric ``fan_out``) so the run page and
the tests can see it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..steps import Step
from .grants import trainers


def assign_points(workers: list[str], points: list[float]) -> dict[str, float]:
    """``hotkey -> sweep value``: worker ``i`` (sorted) gets ``points[i % len(points)]``."""
    if not points:
        raise ValueError("a sweep needs at least one point")
    return {hk: points[i % len(points)] for i, hk in enumerate(sorted(workers))}


@dataclass
class FanOut:
    """The ``fan_out`` action's result."""

    window: int
    points: dict[str, float] = field(default_factory=dict)


def fan_out(holder: Any, step: Step) -> FanOut:
    """Action: assign the sweep points to the workers present (the baseline is version 0)."""
    points = assign_points(trainers(holder.rt), [float(p) for p in step.params.get("points", [])])
    holder.rt.metrics.log("fan_out", window=step.window, points=points)
    return FanOut(step.window, points)
