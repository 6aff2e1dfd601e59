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

:func:`aggregate_stream` computes the same result from *sources* (callables that decode one
update when called) while holding at most one decoded update at a time: peak memory is the output
plus one update (two copies for ``mean``, three for ``sparse_mean``), whatever the number of
contributors. Norm clipping needs every norm before the first update is scaled, so the norms are
either passed in (a sparse codec computes them from its payload) or taken in a first pass over the
sources. The order statistics (``median``, ``trimmed_mean``) need every contributor's value of a
coordinate at once; they decode all sources, as :func:`aggregate` does.
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


def clip_scales(norms: Sequence[float]) -> list[float]:
    """``min(1, median_norm / norm)`` for each norm: the factors :func:`clip_to_median_norm` uses."""
    median = float(_middle(torch.tensor(sorted(norms), dtype=torch.float64)))
    return [1.0 if norm <= median else median / norm for norm in norms]


def clip_to_median_norm(updates: Sequence[Update]) -> list[dict[str, torch.Tensor]]:
    """Scale each update by ``min(1, median_norm / its_norm)``."""
    scales = clip_scales([global_norm(u) for u in updates])
    return [
        {name: t.float() * scale for name, t in update.items()}
        for update, scale in zip(updates, scales, strict=True)
    ]


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


#: Decodes one contributor's update when called; called once per pass, the result dropped after.
Source = Callable[[], Update]

#: Adds one contributor into running sums: ``adder(num, den, factor, scale)`` does
#: ``num += factor * (scale * u)`` and, when ``den`` is not None, ``den += factor * [scale * u != 0]``,
#: creating missing entries as zeros. A sparse codec adds only the coordinates it sent.
Adder = Callable[[dict[str, torch.Tensor], dict[str, torch.Tensor] | None, float, float], None]


def dense_adder(source: Source) -> Adder:
    """The :data:`Adder` of a source: decode, add every coordinate, drop the decoded update.

    Same operations in the same order as the eager rules (clip, multiply, add from zero), so
    the sums are bit-identical to :func:`weighted_mean` / :func:`sparse_mean`.
    """

    def add(num: dict, den: dict | None, factor: float, scale: float) -> None:
        for name, t in source().items():
            clipped = t.float() * scale
            sums = (num,) if den is None else (num, den)
            for acc in sums:
                if name not in acc:  # (setdefault would allocate zeros on every call)
                    acc[name] = torch.zeros_like(clipped)
            if den is not None:
                den[name].add_((clipped != 0).float().mul_(factor))
            num[name].add_(clipped.mul_(factor))

    return add


def aggregate_stream(
    sources: Sequence[Source],
    weights: Sequence[float] | None = None,
    cfg: AggregationConfig | None = None,
    norms: Sequence[float] | None = None,
    adders: Sequence[Adder] | None = None,
) -> dict[str, torch.Tensor]:
    """:func:`aggregate` over sources that decode on demand, one update in memory at a time.

    ``norms`` (each source's global L2 norm) saves the first pass when clipping is on;
    ``adders`` (one per source) replace the dense decode for ``mean`` and ``sparse_mean``.
    """
    cfg = cfg or AggregationConfig()
    weights = _check_weights(sources, weights)
    scales = [1.0] * len(sources)
    if cfg.clip_to_median_norm:
        if norms is None:
            norms = [global_norm(source()) for source in sources]
        scales = clip_scales(norms)
    if cfg.rule in ("median", "trimmed_mean"):
        updates = [
            {name: t.float() * scale for name, t in source().items()}
            for source, scale in zip(sources, scales, strict=True)
        ]
        return AGGREGATORS[cfg.rule](updates, weights, cfg)
    adders = [dense_adder(s) for s in sources] if adders is None else adders
    num: dict[str, torch.Tensor] = {}
    if cfg.rule == "mean":
        total = sum(weights)
        for add, w, scale in zip(adders, weights, scales, strict=True):
            add(num, None, w / total, scale)
        return num
    den: dict[str, torch.Tensor] = {}
    for add, w, scale in zip(adders, weights, scales, strict=True):
        add(num, den, w, scale)
    return {
        name: torch.where(
            den[name] > 0, num[name] / den[name].clamp(min=1e-30), torch.zeros_like(num[name])
        )
        for name in num
    }
