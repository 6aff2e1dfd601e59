"""The biases the poisoning attackers add to an honest update (benchmark and test code only).

Shared by ``attackers.py`` (the OS-process attackers of ``bench.py adversarial``) and
``scoring_sim.py`` (the same attacks scored in one process), so both measure one attack. Every
poison starts from the attacker's honest compressed update ``delta`` and a throw-away descent
direction it trains on samples of its choice (``descent``); the update is subtracted from the
model (``theta - delta``), so ``-descent`` is the ascent direction.

* ``anti_generic``: the subtle poisoner of the issue. Minus a generic descent direction
  (trained on random samples) scaled to ``scale`` x its own norm, then kept only on its own
  top-k support (so the bias that survives is much smaller than ``scale``).
* ``hug``: the threshold hugger. Minus a generic descent direction on its support, scaled (by
  bisection on the attacker's own random samples, measured on what the compressor will send)
  so that it cancels ``fraction`` of its measured gain on random data: as much harm as it
  dares while staying inside whatever tolerance it believes the validators allow.
* ``orthogonal``: plus the ascent direction with its component along the attacker's honest
  update (its estimate of the consensus) removed, on its support, at ``scale`` x its norm: a
  bias a direction check against the consensus cannot see.
* The held-out poisoner is ``on_support`` ascent on the held-out samples the holder reports
  progress on (``subnet.scoring.draws.REPORTED_HELDOUT``): harm aimed at data the validators'
  random train samples never include.

Every bias is put on the attacker's own top-k support: the compressor sends only the top-k
entries, so a dense bias would mostly be dropped before it reached anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from torch import Tensor, nn

from subnet.training import InnerConfig, load_parameters, pseudo_gradient, train_inner
from subnet.training.aggregation import global_norm

Delta = dict[str, Tensor]


def descent(
    worker: nn.Module, start: Mapping[str, Tensor], batches: Iterable, inner: InnerConfig
) -> Delta:
    """The pseudo-gradient of ``inner`` steps of ``worker`` from ``start`` on ``batches``."""
    load_parameters(worker, dict(start))
    train_inner(worker, batches, inner)
    return pseudo_gradient(dict(start), worker)


def _dot(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> float:
    return sum(float((a[k].float() * b[k].float()).sum()) for k in a)


def _on_support(delta: Delta, direction: Mapping[str, Tensor]) -> Delta:
    return {k: direction[k] * (d != 0) for k, d in delta.items()}


def anti_generic(delta: Delta, generic: Delta, scale: float = 0.5) -> Delta:
    """``delta - c * generic`` on ``delta``'s support, ``c = scale * |delta| / |generic|``."""
    c = scale * global_norm(delta) / max(global_norm(generic), 1e-12)
    masked = _on_support(delta, generic)
    return {k: d - c * masked[k] for k, d in delta.items()}


def on_support(delta: Delta, direction: Delta, scale: float = 0.5) -> Delta:
    """``delta - c * direction`` on ``delta``'s support, the bias's norm ``scale * |delta|``."""
    masked = _on_support(delta, direction)
    c = scale * global_norm(delta) / max(global_norm(masked), 1e-12)
    return {k: d - c * masked[k] for k, d in delta.items()}


def orthogonal(delta: Delta, generic: Delta, scale: float = 0.5) -> Delta:
    """``delta + b``: ``b`` the ascent ``-generic`` on the support, minus its part along ``delta``.

    ``|b| = scale * |delta|``; ``b`` is orthogonal to ``delta``, the attacker's estimate of the
    consensus direction.
    """
    masked = _on_support(delta, generic)
    along = _dot(masked, delta) / max(_dot(delta, delta), 1e-24)
    ortho = {k: -(masked[k] - along * delta[k]) for k in delta}
    c = scale * global_norm(delta) / max(global_norm(ortho), 1e-12)
    return {k: d + c * ortho[k] for k, d in delta.items()}


def hug(
    delta: Delta,
    generic: Delta,
    random_gain: Callable[[Delta], float],
    fraction: float = 0.25,
    steps: int = 6,
) -> Delta:
    """``delta - c * generic`` on the support, ``c`` chosen so the random gain falls by ``fraction``.

    ``random_gain(update)`` is the attacker's own measurement (relative loss drop on random
    samples it drew, of the update as it will be sent); bisection over ``c`` in
    ``[0, 2 |delta| / |generic on the support|]``.
    """
    masked = _on_support(delta, generic)
    target = (1.0 - fraction) * random_gain(delta)
    lo, hi = 0.0, 2.0 * global_norm(delta) / max(global_norm(masked), 1e-12)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if random_gain({k: d - mid * masked[k] for k, d in delta.items()}) > target:
            lo = mid
        else:
            hi = mid
    return {k: d - lo * masked[k] for k, d in delta.items()}
