"""The convergence benchmark's tuning: every chosen value strictly inside the values tried.

Each method has a few *axes* (the inner AdamW lr; for a fresh inner optimizer its warm start
``inner.moment_init``; for a DiLoCo-style method the outer lr), each on a multiplicative grid
around a start value (the protocol's default where there is one). The warm start and the inner lr
act together: a fresh AdamW's first steps move about ``lr / sqrt(19 moment_init)`` (betas 0.9,
0.95), so the ``warm_start`` axis scales ``moment_init`` by 4 and the lr by 2 at once, keeping the
first steps' size while changing how long the warm start lasts; the ``inner_lr`` axis then sets
the size. The search is coordinate
descent on those grids: from the start, walk each axis down and up while the validation loss
improves, move to the best point, and repeat over every axis until a full pass finds nothing
better. When it stops, both grid neighbours of the chosen value on every axis have been tried
and are no better, so the choice is bracketed by construction; the grid is extended as far as
the walk needed (``max_trials`` caps it, and ``bracketed`` says if the cap was hit).

Trials run at the first seed and are scored on a *validation* split (train samples that no
worker ever trains on); the held-out split the benchmark reports is never looked at while
tuning. A trial is deterministic, so a setting is never run twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from subnet.training import OuterConfig

# How far apart two grid values of an axis are (a factor).
FACTORS = {"inner_lr": 2.0, "moment_init": 4.0, "outer_lr": 2.0}
WARM_START = {"moment_init": 4.0, "inner_lr": 2.0}  # the warm_start axis moves both
MAX_TRIALS = 40


@dataclass(frozen=True)
class Setting:
    """What a trial varies: the inner lr, the inner warm start, and the outer step (None: DDP)."""

    inner_lr: float
    outer: OuterConfig | None
    moment_init: float = 0.0

    def value(self, axis: str) -> float:
        """The setting's value on ``axis`` (``warm_start``: its ``moment_init``)."""
        if axis == "warm_start":
            return self.moment_init
        if axis == "outer_lr":
            assert self.outer is not None
            return 1.0 if self.outer.name == "fedavg" else self.outer.lr  # FedAvg is SGD at 1
        return getattr(self, axis)

    def moved(self, axis: str, steps: int) -> Setting:
        """This setting ``steps`` grid points along ``axis`` (rounded to 6 significant digits)."""
        if axis == "warm_start":
            moved = {k: _round(getattr(self, k) * f**steps) for k, f in WARM_START.items()}
            return replace(self, **moved)
        value = _round(self.value(axis) * FACTORS[axis] ** steps)
        if axis == "outer_lr":
            assert self.outer is not None
            return replace(self, outer=_with_lr(self.outer, value))
        return replace(self, **{axis: value})

    def describe(self) -> dict:
        """As JSON."""
        out: dict = {"inner_lr": self.inner_lr, "moment_init": self.moment_init}
        if self.outer is not None:
            out["outer"] = self.outer.name
            if self.outer.name != "fedavg":
                out["outer_lr"] = self.outer.lr
        return out


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def _with_lr(outer: OuterConfig, lr: float) -> OuterConfig:
    # FedAvg is SGD at lr 1: another lr makes it plain SGD at that lr.
    name = "sgd" if outer.name == "fedavg" else outer.name
    return outer.model_copy(update={"name": name, "lr": lr})


Trial = Callable[[Setting], dict]  # a setting -> its result, with "val_loss"


@dataclass
class Tuned:
    """The search's outcome: the chosen setting, every trial, and per axis the values tried and
    whether the chosen one has a worse-or-equal tried neighbour on both sides."""

    best: Setting
    trials: list[dict]
    grid: dict[str, list[float]]
    bracketed: dict[str, bool]


def tune(
    start: Setting, axes: tuple[str, ...], trial: Trial, max_trials: int = MAX_TRIALS
) -> Tuned:
    """Coordinate descent over ``axes`` from ``start`` (see the module doc)."""
    seen: dict[Setting, float] = {}
    records: list[dict] = []

    def loss(setting: Setting) -> float:
        if setting not in seen:
            if len(seen) >= max_trials:
                return math.inf  # out of budget: counts as no better
            result = trial(setting)
            records.append({**setting.describe(), **result})
            seen[setting] = result["val_loss"]
        return seen[setting]

    best = start
    loss(best)
    improved = True
    while improved:
        improved = False
        for axis in axes:
            for direction in (-1, 1):
                while loss(candidate := best.moved(axis, direction)) < loss(best):
                    best, improved = candidate, True
    grid = {axis: sorted({s.value(axis) for s in seen}) for axis in axes}
    bracketed = {
        axis: all(
            best.moved(axis, d) in seen and seen[best.moved(axis, d)] >= seen[best] for d in (-1, 1)
        )
        for axis in axes
    }
    return Tuned(best, records, grid, bracketed)
