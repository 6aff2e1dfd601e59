"""An adversarial miner for the integration test: honest receipts, random-noise updates."""

from __future__ import annotations

import sys

import torch

from subnet.neuron.miner import Miner, Upload
from subnet.node.entry import run_role


class NoiseMiner(Miner):
    """Trains like everyone (so its receipt is valid) but uploads Gaussian noise instead."""

    role = "miner"

    def step(self, window: int) -> Upload:
        honest = super().step(window)
        noise = {k: torch.randn_like(v) * 0.05 for k, v in self.replica.state.items()}
        return Upload(self.compressor.encode(noise), honest.metadata)


if __name__ == "__main__":
    sys.exit(run_role(NoiseMiner, "noise miner (tests only)"))
