"""Fit a local run's window to this machine before any neuron starts.

A window's miner phase must hold a sync, ``H`` inner steps, compression and an upload. On a busy
2-core machine one step can take several times what it takes on an idle one, and three miners
training at once share the cores, so a fixed window length that fits one machine makes every
upload late on another. ``measure_step_seconds`` times a few real inner steps of the run's model
here, now (under whatever load the machine has), and ``window_blocks_for`` sizes the window from
that with headroom for the miners competing with each other.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import torch

from ..model import build_model
from ..training import build_inner_optimizer, train_inner
from ..training.config import InnerConfig

# Seconds outside the inner steps, on the 2-core reference machine with the tiny preset:
# a miner's sync, compression and upload; a validator's fetches, report and weights; the
# holder's merge and publish. Each phase also does work that scales with the step time
# (validators and the holder run a few forward passes per upload): ``PER_STEP`` steps' worth.
FIXED_UPLOAD_S = 1.5
FIXED_REPORT_S = 1.0
FIXED_MERGE_S = 1.5
PER_STEP = 4


@dataclass(frozen=True)
class Calibration:
    """What was measured and the window chosen from it."""

    step_s: float  # one inner step here, now, on one thread
    contended_step_s: float  # the same with every miner training at once
    window_blocks: int
    upload_deadline: int
    report_deadline: int

    def describe(self, block_time: float) -> str:
        """One line for the demo's output."""
        return (
            f"calibrated: one inner step takes {self.step_s:.3f} s here "
            f"(~{self.contended_step_s:.3f} s with every miner training); window "
            f"{self.window_blocks} blocks ({self.window_blocks * block_time:.0f} s), uploads due "
            f"by offset {self.upload_deadline}"
        )


def measure_step_seconds(
    preset: str, vocab_size: int, seq_len: int, micro_batch: int, steps: int = 3
) -> float:
    """Median seconds of one inner step of ``preset`` on one CPU thread (after one warm-up)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the neurons run with --neuron.threads 1
    try:
        model = build_model(preset, vocab_size=vocab_size, seed=0)
        cfg = InnerConfig(steps=1, micro_batch=micro_batch)
        optimizer = build_inner_optimizer(model, cfg)
        gen = torch.Generator().manual_seed(0)
        times = []
        for _ in range(steps + 1):
            tokens = torch.randint(0, vocab_size, (micro_batch, seq_len + 1), generator=gen)
            started = time.perf_counter()
            train_inner(model, [(tokens[:, :-1], tokens[:, 1:])], cfg, optimizer)
            times.append(time.perf_counter() - started)
        return sorted(times[1:])[len(times[1:]) // 2]
    finally:
        torch.set_num_threads(threads)


def window_blocks_for(
    step_s: float,
    inner_steps: int,
    block_time: float,
    miners: int,
    *,
    cores: int | None = None,
    headroom: float = 1.5,
    minimum: int = 20,
) -> Calibration:
    """The window (in blocks) whose phases fit this machine, with ``headroom`` to spare.

    Miners train at the same time, and the stack itself (simnet, S3, validators polling) takes
    about one more core's worth, so each step costs ``step_s x max(1, (miners + 1) / cores)``
    (the measurement already includes any other load on the machine). The miner phase gets
    half the window, validators 20% and the holder 30%, as in the demo's protocol.
    """
    cores = cores or os.cpu_count() or 1
    contended = step_s * max(1.0, (miners + 1) / cores)
    upload_s = headroom * (FIXED_UPLOAD_S + inner_steps * contended)
    need = max(
        2 * upload_s,  # uploads: offsets 0 .. blocks/2
        headroom * (FIXED_REPORT_S + PER_STEP * contended) / 0.2,  # validators: 20%
        headroom * (FIXED_MERGE_S + PER_STEP * contended) / 0.3,  # the holder: the last 30%
    )
    blocks = max(minimum, math.ceil(need / block_time))
    blocks += blocks % 2  # an even window keeps upload_deadline exactly half
    return Calibration(step_s, contended, blocks, blocks // 2, (7 * blocks) // 10)
