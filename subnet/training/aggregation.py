"""Aggregation rules: many workers' pseudo-gradients in, one out.

* ``mean`` -- the weighted mean (DiLoCo, Douillard et al., 2023; SparseLoCo, Sarfi et al., 2025).
* ``sparse_mean`` -- per coordinate, the weighted mean over the contributors that sent it (a
  non-zero value), so a coordinate only one sparse sender chose is not diluted by everyone else.
* ``median`` -- the coordinate-wise median (Yin et al., 2018, "Byzantine-Robust Distributed
  Learning"); with an even count, the mean of the two middle values.
* ``trimmed_mean`` -- per coordinate, drop the ``floor(trim_ratio * n)`` largest and smallest values
  and average the rest (Yin et al., 2018).

Before any rule, :func:`clip_to_median_norm` can scale every update down to the median of their
global L2 norms, so no single contributor can dominate by sheer size (as in robust FL practice,
e.g. Karimireddy et al., 2021, "Learning from History for Byzantine Robust Optimization").
All functions are pure: they return new tensors and never modify their inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch

from subnet.training.config import AggregationConfig

Update = Mapping[str, torch.Tensor]


def _check_weights(updates: Sequence[Update], weights: Sequence[float] | None) -> list[float]:
    if not updates:
        raise ValueError("nothing to aggregate")
    weights = [1.0] * len(updates) if weights is None else [float(w) for w in weights]
    if len(weights) != len(updates):
        raise ValueError("one weight per update")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError("weights must be finite, non-negative and not all zero")
    return weights


def _middle(sorted_values: torch.Tensor) -> torch.Tensor:
    """Median along dim 0 of already sorted values; even counts average the two middles."""
    n = sorted_values.shape[0]
    if n % 2:
        return sorted_values[n // 2]
    return (sorted_values[n // 2 - 1] + sorted_values[n // 2]) / 2


def global_norm(update: Update) -> float:
    """L2 norm of all tensors of one update taken together."""
    return math.sqrt(sum(float(t.float().pow(2).sum()) for t in update.values()))


def clip_to_median_norm(updates: Sequence[Update]) -> list[dict[str, torch.Tensor]]:
    """Scale each update by ``min(1, median_norm / its_norm)``."""
    norms = [global_norm(u) for u in updates]
    median = float(_middle(torch.tensor(sorted(norms), dtype=torch.float64)))
    out = []
    for update, norm in zip(updates, norms, strict=True):
        scale = 1.0 if norm <= median else median / norm
        out.append({name: t.float() * scale for name, t in update.items()})
    return out


def weighted_mean(
    updates: Sequence[Update], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """``sum_i w_i u_i / sum_i w_i``."""
    weights = _check_weights(updates, weights)
    total = sum(weights)
    return {
        name: sum(u[name].float() * (w / total) for u, w in zip(updates, weights, strict=True))
        for name in updates[0]
    }


def sparse_mean(
    updates: Sequence[Update], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Per coordinate ``sum_i w_i u_i / sum_{i: u_i != 0} w_i``; zero where nobody contributed."""
    weights = _check_weights(updates, weights)
    out = {}
    for name in updates[0]:
        num = sum(u[name].float() * w for u, w in zip(updates, weights, strict=True))
        den = sum((u[name] != 0).float() * w for u, w in zip(updates, weights, strict=True))
        out[name] = torch.where(den > 0, num / den.clamp(min=1e-30), torch.zeros_like(num))
    return out


def _positive(updates: Sequence[Update], weights: Sequence[float] | None) -> list[Update]:
    weights = _check_weights(updates, weights)
    return [u for u, w in zip(updates, weights, strict=True) if w > 0]


def coordinate_median(
    updates: Sequence[Update], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Coordinate-wise median of the updates with positive weight."""
    kept = _positive(updates, weights)
    return {
        name: _middle(torch.stack([u[name].float() for u in kept]).sort(dim=0).values)
        for name in kept[0]
    }


def trimmed_mean(
    updates: Sequence[Update], weights: Sequence[float] | None = None, trim_ratio: float = 0.1
) -> dict[str, torch.Tensor]:
    """Coordinate-wise mean after dropping ``floor(trim_ratio * n)`` values at each end."""
    kept = _positive(updates, weights)
    n = len(kept)
    cut = math.floor(trim_ratio * n)
    if n - 2 * cut < 1:
        raise ValueError("trim_ratio leaves nothing to average")
    out = {}
    for name in kept[0]:
        ordered = torch.stack([u[name].float() for u in kept]).sort(dim=0).values
        out[name] = ordered[cut : n - cut].mean(dim=0)
    return out


Rule = Callable[
    [Sequence[Update], Sequence[float] | None, AggregationConfig], dict[str, torch.Tensor]
]

AGGREGATORS: dict[str, Rule] = {
    "mean": lambda u, w, cfg: weighted_mean(u, w),
    "sparse_mean": lambda u, w, cfg: sparse_mean(u, w),
    "median": lambda u, w, cfg: coordinate_median(u, w),
    "trimmed_mean": lambda u, w, cfg: trimmed_mean(u, w, cfg.trim_ratio),
}


def aggregate(
    updates: Sequence[Update],
    weights: Sequence[float] | None = None,
    cfg: AggregationConfig | None = None,
) -> dict[str, torch.Tensor]:
    """Clip to the median norm if configured, then apply ``cfg.rule``."""
    cfg = cfg or AggregationConfig()
    if cfg.clip_to_median_norm:
        updates = clip_to_median_norm(updates)
    return AGGREGATORS[cfg.rule](updates, weights, cfg)
