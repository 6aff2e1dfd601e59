"""Tokens per second of Beam's inner loop against a plain PyTorch loop, per preset, length, dtype.

Every cell (preset x sequence length x precision) builds two copies of the same seeded model, one
trained by Beam's ``Trainer`` (what the miner calls; ``train_inner`` underneath, with the
protocol's inner settings) and one by a plain hand-written loop with the same AdamW settings and
clipping, on the same batches. The process warms up on an untimed cell first, and each cell on
``--warmup`` untimed steps of each loop; then ``--reps`` repetitions time one burst of each loop,
in alternating order, so load from anything else on the machine hits both alike. Figures are
medians over the repetitions, with their spread (min and max). ``overhead_ratio`` is the median of
Beam's time over the plain loop's, per repetition: 1.00 means Beam costs nothing.

``mfu`` is model FLOPs utilisation: 6 x (matmul parameters, the tied head included) + 12 x layers
x d_model x seq_len FLOPs per token (PaLM's count; causal masking not subtracted), divided by the
device's dense peak for the dtype. Peaks are known only for the GPUs in ``PEAK_TFLOPS``; on a CPU
the peak is reported as unknown.

bf16 on a CPU without native bf16 matmuls (no AVX512-BF16 or AMX: ``bf16_native`` false) runs
many times slower than fp32; there a bf16 cell is *reduced*: one step of one sequence, timed against Beam's loop in fp32 on
the same sequence (``fp32_same_batch_tokens_per_s``) instead of the plain loop, so that the grid
still finishes in minutes. ``bf16_speedup_over_fp32`` compares like with like either way.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

from benchmarks.common import environment, median_spread, setup, sync
from subnet.config import ProtocolConfig
from subnet.model import ModelConfig, build_model
from subnet.training import build_inner_optimizer
from subnet.training.parallel import ParallelConfig
from subnet.training.precision import bf16_native
from subnet.training.trainer import Trainer

TARGET_OVERHEAD = 1.05

# Dense (no sparsity) peak TFLOPS from NVIDIA's datasheets: (bf16 tensor core, fp32 non-tensor).
# Matched by substring of torch.cuda.get_device_name(), first match wins.
PEAK_TFLOPS: list[tuple[str, float, float]] = [
    ("H100 PCIe", 756.0, 51.2),
    ("H100", 989.4, 66.9),
    ("H200", 989.4, 66.9),
    ("A100", 312.0, 19.5),
    ("L4", 121.0, 30.3),
    ("RTX 4090", 165.2, 82.6),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py throughput``."""
    parser.add_argument("--presets", default="tiny,small,hypertrain-20m")
    parser.add_argument("--seq-lens", default="64,256")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per step (batch x seq)")
    parser.add_argument("--reps", type=int, default=15, help="timed repetitions per loop per cell")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per loop first")
    parser.add_argument(
        "--burst-seconds", type=float, default=0.25, help="about how long one timed burst lasts"
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile Beam's model")


def flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token: forward + backward of every matmul, plus attention."""
    d, layers = config.d_model, config.n_layers
    matmul_params = layers * (4 * d * d + 3 * d * config.d_ff) + d * config.vocab_size
    return 6.0 * matmul_params + 12.0 * layers * d * seq_len


def peak_tflops(device: str, bf16: bool) -> float | None:
    """The device's dense peak for the dtype, or None where it is not known."""
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(device)
    for key, bf16_peak, fp32_peak in PEAK_TFLOPS:
        if key in name:
            return bf16_peak if bf16 else fp32_peak
    return None


def _plain_loop(
    model: nn.Module, batches: list, opt: torch.optim.Optimizer, bf16: bool, device: str
) -> None:
    """The loop everyone writes first: no accounting, no accumulation."""
    model.train()
    for x, y in batches:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            _, loss = model(x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()


def _timed(fn, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def _loops(args: argparse.Namespace, preset: str, seq_len: int, bf16: bool, reduced: bool):
    """The two loops of a cell on the same seeded model, and a source of fresh batches."""
    batch = 1 if reduced else max(1, args.tokens // seq_len)
    cfg = ProtocolConfig().inner.model_copy(
        update={"steps": 1, "micro_batch": batch, "accumulation": 1, "bf16_autocast": bf16}
    )
    trainer = Trainer(ParallelConfig(compile=args.compile))
    beam_model = build_model(preset, seed=0, device=args.device)
    beam_opt = build_inner_optimizer(beam_model, cfg)
    plain_model = build_model(preset, seed=0, device=args.device)
    plain_opt = torch.optim.AdamW(
        plain_model.parameters(),
        lr=cfg.lr,
        betas=cfg.betas,
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
    )
    gen = torch.Generator().manual_seed(0)
    vocab = beam_model.config.vocab_size

    def batches(steps: int) -> list:
        s = torch.randint(0, vocab, (steps, batch, seq_len + 1), generator=gen)
        return [(s[i, :, :-1], s[i, :, 1:]) for i in range(steps)]

    def train(model: nn.Module, opt: torch.optim.Optimizer, bf16_on: bool):
        def loop(b: list) -> None:
            steps = {"steps": len(b), "bf16_autocast": bf16_on}
            trainer.train(model, b, cfg.model_copy(update=steps), opt)

        return loop

    beam = train(beam_model, beam_opt, bf16)
    if reduced:  # the plain copy trains in fp32 instead: bf16's speed-up on the same batch
        return (
            {"beam": beam, "fp32": train(plain_model, plain_opt, False)},
            batches,
            batch,
            beam_model.config,
        )

    def plain(b: list) -> None:
        _plain_loop(plain_model, b, plain_opt, bf16, args.device)

    return {"beam": beam, "plain": plain}, batches, batch, beam_model.config


def run_cell(args: argparse.Namespace, preset: str, seq_len: int, bf16: bool) -> dict:
    """One preset x length x precision: warm up, then interleaved repetitions of both loops.

    Warm-up: ``--warmup`` untimed steps of each loop (kernel selection, allocator, compilation).
    Then each repetition times one burst of ``burst`` steps of each loop, in alternating order
    (ABBA), on the same batches; ``burst`` is sized during warm-up so a burst lasts about
    ``--burst-seconds`` (a step of ``tiny`` is too short to time alone). Tokens/s are from the
    median burst time, with the spread (min and max over repetitions); the overhead ratio is
    the median of the per-repetition ratios, so load that hits one repetition hits both loops.
    """
    context = build_model(preset).config.context_len
    if seq_len > context:
        return {"preset": preset, "seq_len": seq_len, "precision": "bf16" if bf16 else "fp32",
                "skipped": f"seq_len {seq_len} > the preset's context_len {context}"}  # fmt: skip
    reduced = bf16 and not bf16_native(args.device)
    loops, batches, batch, config = _loops(args, preset, seq_len, bf16, reduced)
    warm = max(1, 1 if reduced else args.warmup)
    step_s = min(
        _timed(lambda n=name: loops[n](batches(1)), args.device)
        for _ in range(warm)
        for name in loops
    )
    burst = 1 if reduced else max(1, min(64, round(args.burst_seconds / max(step_s, 1e-6))))
    reps = 1 if reduced else args.reps
    times: dict[str, list[float]] = {name: [] for name in loops}
    for rep in range(reps):
        b = batches(burst)
        for name in list(loops) if rep % 2 else list(reversed(loops)):
            times[name].append(_timed(lambda n=name, b=b: loops[n](b), args.device))
    tokens = burst * batch * seq_len
    beam = median_spread([tokens / t for t in times["beam"]])
    other_name = "plain" if "plain" in times else "fp32"
    other = median_spread([tokens / t for t in times[other_name]])
    ratios = median_spread([b / p for b, p in zip(times["beam"], times[other_name], strict=True)])
    peak = peak_tflops(args.device, bf16)
    flops = flops_per_token(config, seq_len)
    cell = {
        "preset": preset, "seq_len": seq_len, "precision": "bf16" if bf16 else "fp32",
        "batch": batch, "burst_steps": burst, "reps": reps, "warmup_steps": warm,
        "reduced": reduced,
        "beam_tokens_per_s": round(beam["median"], 1),
        "beam_tokens_per_s_spread": [round(beam["min"], 1), round(beam["max"], 1)],
        "tflops": round(beam["median"] * flops / 1e12, 4),
        "mfu": round(beam["median"] * flops / (peak * 1e12), 4) if peak else None,
    }  # fmt: skip
    if other_name == "plain":
        cell |= {
            "plain_tokens_per_s": round(other["median"], 1),
            "plain_tokens_per_s_spread": [round(other["min"], 1), round(other["max"], 1)],
            "overhead_ratio": round(ratios["median"], 4),
            "overhead_ratio_spread": [round(ratios["min"], 4), round(ratios["max"], 4)],
        }
    else:
        cell["fp32_same_batch_tokens_per_s"] = round(other["median"], 1)
    return cell


def run(args: argparse.Namespace) -> dict:
    """Every cell of the grid; return the JSON record."""
    setup(args.threads)
    started, load_start = time.perf_counter(), round(os.getloadavg()[0], 2)
    # The process warms up first (thread pools, allocator, kernel caches), so that the first
    # cell is not slower for being first: one untimed short cell of the first preset.
    first = args.presets.split(",")[0]
    run_cell(argparse.Namespace(**{**vars(args), "reps": 2}), first, 64, bf16=False)
    cells = []
    for preset in args.presets.split(","):
        for seq_len in (int(s) for s in args.seq_lens.split(",")):
            for precision in args.precisions.split(","):
                cells.append(run_cell(args, preset, seq_len, precision == "bf16"))
    ratios = [c["overhead_ratio"] for c in cells if c.get("overhead_ratio") is not None]
    speedups = {
        f"{f['preset']}@{f['seq_len']}": round(
            b["beam_tokens_per_s"] / (b.get("fp32_same_batch_tokens_per_s") or f["beam_tokens_per_s"]), 3
        )
        for f in cells for b in cells
        if f["precision"] == "fp32" and b["precision"] == "bf16" and "skipped" not in f
        and (f["preset"], f["seq_len"]) == (b["preset"], b["seq_len"])
    }  # fmt: skip
    env = environment(args.device)
    env["load_avg_1m"] = load_start  # environment() runs at the end; the start is what matters
    env["bf16_native"] = bf16_native(args.device)
    env["tcmalloc"] = "tcmalloc" in os.environ.get("LD_PRELOAD", "")
    env["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    return {
        "benchmark": "throughput",
        "defaults": "the protocol's inner settings (AdamW, clipping) for Beam's loop",
        "tokens_per_step": args.tokens,
        "reps": args.reps,
        "timing": "median of interleaved (ABBA) bursts after warm-up; spread = [min, max]",
        "compile": args.compile,
        "cells": cells,
        "bf16_speedup_over_fp32": speedups,
        "worst_overhead_ratio": max(ratios) if ratios else None,  # of the per-cell medians
        "target_overhead": TARGET_OVERHEAD,
        "target_met": bool(ratios) and max(ratios) <= TARGET_OVERHEAD,
        "peak_tflops": "unknown" if peak_tflops(args.device, True) is None else "PEAK_TFLOPS",
        "wall_s": round(time.perf_counter() - started, 1),
        "env": env,
    }
