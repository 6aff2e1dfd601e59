"""Outer optimizers: one SGD step on the global parameters per round, from a pseudo-gradient.

DiLoCo (Douillard et al., 2023) found SGD with Nesterov momentum (lr 0.7, momentum 0.9) best;
SparseLoCo (Sarfi et al., 2025) uses plain SGD because the senders' error feedback already plays
the part of momentum; FedAvg (McMahan et al., 2017) is SGD with lr 1. The update rule is torch's
``SGD`` without dampening (the tests check the two agree):
``b = mu * b + g``; step ``g + mu * b`` (Nesterov) or ``b`` (heavy ball); ``p -= lr * step``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from subnet.training.config import OuterConfig


class OuterSGD:
    """SGD over a dict of named tensors, with optional (Nesterov) momentum kept per name."""

    def __init__(self, lr: float, momentum: float = 0.0, nesterov: bool = False) -> None:
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov needs a positive momentum")
        self.lr = lr
        self.momentum = momentum
        self.nesterov = nesterov
        self.buffers: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def step(self, params: Mapping[str, torch.Tensor], grad: Mapping[str, torch.Tensor]) -> None:
        """Update ``params`` in place from the aggregated pseudo-gradient ``grad``."""
        for name, p in params.items():
            g = grad[name].to(device=p.device, dtype=torch.float32)
            if self.momentum > 0:
                buf = self.buffers.get(name)
                if buf is None:
                    buf = self.buffers[name] = g.clone()
                else:
                    buf.mul_(self.momentum).add_(g)
                g = g.add(buf, alpha=self.momentum) if self.nesterov else buf
            p.add_(g.to(p.dtype), alpha=-self.lr)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Momentum buffers by parameter name (empty without momentum)."""
        return {name: b.clone() for name, b in self.buffers.items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore momentum buffers saved by :meth:`state_dict`."""
        self.buffers = {name: b.detach().float().clone() for name, b in state.items()}


OUTER_OPTIMIZERS: dict[str, Callable[[OuterConfig], OuterSGD]] = {
    "nesterov": lambda cfg: OuterSGD(cfg.lr, cfg.momentum, nesterov=True),
    "sgd": lambda cfg: OuterSGD(cfg.lr),
    "fedavg": lambda cfg: OuterSGD(1.0),
}


def build_outer_optimizer(cfg: OuterConfig) -> OuterSGD:
    """The outer optimizer ``cfg`` names."""
    return OUTER_OPTIMIZERS[cfg.name](cfg)
