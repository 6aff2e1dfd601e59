"""The convergence benchmark's fair protocol: the same tuning budget for every method.

Every method gets ``BUDGET`` training runs (trials) at seed 0, scored on a *validation* split (train
samples that no worker ever trains on), and keeps its best one; the held-out split that the
benchmark reports is never looked at while tuning. Then the chosen setting runs on every seed.

The trials (6 each, so the budget is equal):

* DDP has one learning rate, the inner AdamW lr: six values on a doubling grid,
  ``INNER_GRID + DDP_EXTRA``.
* A DiLoCo-style method has two: first the inner lr over ``INNER_GRID`` at the method's default
  outer step, then, at the best inner lr, three more outer learning rates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from subnet.training import OuterConfig

BUDGET = 6  # trials per method
INNER_GRID = (2e-3, 4e-3, 8e-3)
DDP_EXTRA = (1e-3, 1.6e-2, 3.2e-2)
# Outer lrs tried at the best inner lr, besides each method's default (METHODS in convergence.py).
OUTER_GRID: dict[str, tuple[float, ...]] = {
    "diloco": (0.1, 0.3, 1.0),  # Nesterov, momentum 0.9 (default 0.7, the DiLoCo paper's)
    "diloco-fedavg": (0.5, 0.75, 1.5),  # plain SGD from FedAvg's lr 1
    "diloco-int8": (0.5, 0.75, 1.5),
    "sparseloco": (1.0, 3.0, 4.0),  # plain SGD (default 2)
}


@dataclass(frozen=True)
class Setting:
    """What a trial varies: the inner lr, and for DiLoCo-style methods the outer step."""

    inner_lr: float
    outer: OuterConfig | None  # None for DDP

    def describe(self) -> dict:
        """As JSON."""
        out: dict = {"inner_lr": self.inner_lr}
        if self.outer is not None:
            out["outer"] = self.outer.name
            if self.outer.name != "fedavg":
                out["outer_lr"] = self.outer.lr
        return out


Trial = Callable[[Setting], dict]  # a setting -> its result, with "val_loss"


def _with_lr(outer: OuterConfig, lr: float) -> OuterConfig:
    # FedAvg is SGD at lr 1: another lr makes it plain SGD at that lr.
    name = "sgd" if outer.name == "fedavg" else outer.name
    return outer.model_copy(update={"name": name, "lr": lr})


def tune(method: str, default_outer: OuterConfig | None, trial: Trial) -> tuple[Setting, list]:
    """Run ``BUDGET`` trials of ``method``; return the best setting and every trial's record."""
    records: list[dict] = []

    def run(setting: Setting) -> float:
        result = trial(setting)
        records.append({**setting.describe(), **result})
        return result["val_loss"]

    if default_outer is None:
        settings = [Setting(lr, None) for lr in (*INNER_GRID, *DDP_EXTRA)]
        losses = [run(s) for s in settings]
    else:
        settings = [Setting(lr, default_outer) for lr in INNER_GRID]
        losses = [run(s) for s in settings]
        inner = settings[losses.index(min(losses))].inner_lr
        more = [Setting(inner, _with_lr(default_outer, lr)) for lr in OUTER_GRID[method]]
        settings += more
        losses += [run(s) for s in more]
    assert len(settings) == BUDGET, "every method gets the same number of trials"
    return settings[losses.index(min(losses))], records
