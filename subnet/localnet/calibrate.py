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
from ..scoring.assess import sample_losses
from ..training import build_inner_optimizer, train_inner
from ..training.config import InnerConfig

# Seconds outside the inner steps, on the 2-core reference machine with the tiny preset:
# a miner's sync, compression and upload; a validator's fetches, report and weights; the
# holder's merge and publish. The holder also does work that scales with the step time (a few
# forward passes): ``PER_STEP`` steps' worth; the validators' evaluation is ``eval_passes``
# forward passes of a micro-batch, timed by ``measure_forward_seconds`` (``eval_steps`` steps'
# worth when no forward pass was timed).
FIXED_UPLOAD_S = 1.5
FIXED_REPORT_S = 1.0
FIXED_MERGE_S = 1.5
# A commit-reveal lane's reveal: every miner sees the tick after the deadline and writes its
# upload; the validators start scoring once all are in (``window.reveal_by`` at the latest).
FIXED_REVEAL_S = 1.0
PER_STEP = 4


@dataclass(frozen=True)
class Calibration:
    """What was measured and the window chosen from it."""

    step_s: float  # one inner step here, now, on one thread
    contended_step_s: float  # the same with every miner training at once
    window_blocks: int
    upload_deadline: int
    report_deadline: int
    eval_s: float = 0.0  # a validator's evaluation of one window, uncontended, no headroom
    reveal_deadline: int | None = None  # how long validators wait for the reveals, at most

    def describe(self, block_time: float) -> str:
        """One line for the demo's output."""
        return (
            f"calibrated: one inner step takes {self.step_s:.3f} s here "
            f"(~{self.contended_step_s:.3f} s with every miner training), a validator's "
            f"evaluation ~{self.eval_s:.1f} s; window "
            f"{self.window_blocks} blocks ({self.window_blocks * block_time:.0f} s), uploads due "
            f"by offset {self.upload_deadline}, revealed by {self.reveal_deadline}, score "
            f"reports by {self.report_deadline}"
        )


def _median_seconds(run, vocab_size: int, seq_len: int, micro_batch: int, repeats: int) -> float:
    """Median seconds of ``run(inputs, targets)`` on random tokens, one thread, after a warm-up."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the neurons run with --neuron.threads 1
    try:
        gen = torch.Generator().manual_seed(0)
        times = []
        for _ in range(repeats + 1):
            tokens = torch.randint(0, vocab_size, (micro_batch, seq_len + 1), generator=gen)
            started = time.perf_counter()
            run(tokens[:, :-1], tokens[:, 1:])
            times.append(time.perf_counter() - started)
        return sorted(times[1:])[len(times[1:]) // 2]
    finally:
        torch.set_num_threads(threads)


def measure_step_seconds(
    preset: str, vocab_size: int, seq_len: int, micro_batch: int, steps: int = 3
) -> float:
    """Median seconds of one inner step of ``preset`` on one CPU thread (after one warm-up)."""
    model = build_model(preset, vocab_size=vocab_size, seed=0)
    cfg = InnerConfig(steps=1, micro_batch=micro_batch)
    optimizer = build_inner_optimizer(model, cfg)
    return _median_seconds(
        lambda x, y: train_inner(model, [(x, y)], cfg, optimizer),
        vocab_size,
        seq_len,
        micro_batch,
        steps,
    )


def measure_forward_seconds(
    preset: str, vocab_size: int, seq_len: int, micro_batch: int, passes: int = 5
) -> float:
    """Median seconds of one evaluation forward pass of ``micro_batch`` samples, one thread.

    Timed with the validators' own ``sample_losses``: at the demo's sizes a forward pass is
    mostly per-call overhead, so it costs far more than a third of an inner step.
    """
    model = build_model(preset, vocab_size=vocab_size, seed=0)
    return _median_seconds(
        lambda x, y: sample_losses(model, [(x, y)]), vocab_size, seq_len, micro_batch, passes
    )


def eval_passes(miners: int, eval_samples: int, micro_batch: int) -> int:
    """Forward passes of one micro-batch in a validator's evaluation of a window's uploads.

    Each upload is measured on ``eval_samples`` own and random samples with it, without it and
    against the reference (``subnet.scoring.assess``: 5 passes of ``eval_samples`` per upload
    below 4 uploads, 4 from then on, plus 2 on the random samples once).
    """
    per_set = (5 if miners < 4 else 4) * miners + 2
    return per_set * math.ceil(eval_samples / micro_batch)


def eval_steps(miners: int, eval_samples: int, micro_batch: int) -> float:
    """A validator's evaluation of a window's uploads, in inner steps' worth of compute.

    Each upload is measured on ``eval_samples`` own and random samples with it, without it and
    against the reference (``subnet.scoring.assess``: 5 forward passes of ``eval_samples`` per
    upload below 4 uploads, 4 from then on, plus 2 on the random samples once); an inner step is
    ``micro_batch`` samples forward and backward, about 3 forward passes.
    """
    passes = (5 if miners < 4 else 4) * miners + 2
    return passes * eval_samples / (3 * micro_batch)


def window_blocks_for(
    step_s: float,
    inner_steps: int,
    block_time: float,
    miners: int,
    *,
    validators: int = 2,
    eval_samples: int = 64,
    micro_batch: int = 8,
    cores: int | None = None,
    headroom: float = 1.5,
    minimum: int = 20,
    forward_s: float | None = None,
) -> Calibration:
    """The window (in blocks) whose phases fit this machine, with ``headroom`` to spare.

    Miners train at the same time, and the stack itself (simnet, S3, validators polling) takes
    about one more core's worth, so each step costs ``step_s x max(1, (miners + 1) / cores)``
    (the measurement already includes any other load on the machine); the validators evaluate
    at the same time as each other, ``eval_steps`` each, after waiting for the miners' reveals
    (``FIXED_REVEAL_S``, which also sets ``reveal_deadline``). Each phase gets what it needs: by
    default (and at the floor) the miners half the window, the validators 20 % and the holder
    30 %; when the validators need more than their 20 % (the own-data evaluation is
    ``eval_steps`` per window), the deadlines follow the phases' needs instead. With
    ``forward_s`` (``measure_forward_seconds``) the evaluation is ``eval_passes`` of it instead
    of ``eval_steps`` inner steps.
    """
    cores = cores or os.cpu_count() or 1
    contended = step_s * max(1.0, (miners + 1) / cores)
    if forward_s is None:
        eval_s = eval_steps(miners, eval_samples, micro_batch) * step_s
    else:
        eval_s = eval_passes(miners, eval_samples, micro_batch) * forward_s
    upload_s = headroom * (FIXED_UPLOAD_S + inner_steps * contended)
    reveal_s = headroom * FIXED_REVEAL_S
    score_s = reveal_s + headroom * (FIXED_REPORT_S + eval_s * max(1.0, (validators + 1) / cores))
    merge_s = headroom * (FIXED_MERGE_S + PER_STEP * contended)
    fixed = max(2 * upload_s, score_s / 0.2, merge_s / 0.3)  # the default split
    blocks = max(minimum, math.ceil(fixed / block_time))
    blocks += blocks % 2  # an even window keeps upload_deadline exactly half
    split = (blocks, blocks // 2, (7 * blocks) // 10)
    phases = [math.ceil(x / block_time) for x in (upload_s, score_s, merge_s)]
    if sum(phases) < blocks:  # the phases' own needs make a shorter window
        upload, score, merge = phases
        split = (upload + score + merge, upload, upload + score)
        if split[0] < minimum:
            extra = minimum - split[0]  # the floor: spread what is left like the default split
            upload += extra // 2
            score += extra // 5
            split = (minimum, upload, upload + score)
    blocks, upload, report = split
    # The reveals' share of the validators' phase: the snapshot and guard ticks, then the
    # reveals; at most half the phase, and none when the phase cannot hold them.
    reveal = min(upload + max(3, math.ceil(reveal_s / block_time)), upload + (report - upload) // 2)
    reveal_deadline = max(reveal, upload + 3) if report - upload >= 3 else None
    return Calibration(step_s, contended, *split, eval_s=eval_s, reveal_deadline=reveal_deadline)


def calibrate(
    preset: str,
    vocab_size: int,
    inner_steps: int,
    block_time: float,
    miners: int,
    *,
    validators: int = 2,
    eval_samples: int = 64,
    headroom: float = 1.5,
    seq_len: int = 64,
    micro_batch: int = 8,
) -> Calibration:
    """Time an inner step and an evaluation forward pass of ``preset`` on this machine now, and
    size the window for them (``window_blocks_for``)."""
    step_s = measure_step_seconds(preset, vocab_size, seq_len=seq_len, micro_batch=micro_batch)
    forward_s = measure_forward_seconds(
        preset, vocab_size, seq_len=seq_len, micro_batch=micro_batch
    )
    return window_blocks_for(
        step_s,
        inner_steps,
        block_time,
        miners,
        validators=validators,
        eval_samples=eval_samples,
        micro_batch=micro_batch,
        headroom=headroom,
        forward_s=forward_s,
    )
