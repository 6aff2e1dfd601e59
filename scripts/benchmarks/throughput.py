"""Tokens per second of Beam's inner loop against a plain PyTorch loop, per preset, length, dtype.

Every cell (preset x sequence length x precision) builds two copies of the same seeded model, one
trained by Beam's ``Trainer`` (what the miner calls; ``train_inner`` underneath) and one by a plain
hand-written loop with the same AdamW settings and clipping, on the same batches. The loops
alternate one-step bursts until the cell's time is spent, so load from anything else on the machine
hits both alike. ``overhead_ratio`` is plain tokens/s over Beam's: 1.00 means Beam costs nothing.

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

from benchmarks.common import environment, setup, sync
from subnet.model import ModelConfig, build_model
from subnet.training import InnerConfig, build_inner_optimizer
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
    parser.add_argument(
        "--seconds", type=float, default=6.0, help="timed seconds per loop per cell"
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


def run_cell(args: argparse.Namespace, preset: str, seq_len: int, bf16: bool) -> dict:
    """One preset x length x precision: alternate one-step bursts of both loops."""
    context = build_model(preset).config.context_len
    if seq_len > context:
        return {"preset": preset, "seq_len": seq_len, "precision": "bf16" if bf16 else "fp32",
                "skipped": f"seq_len {seq_len} > the preset's context_len {context}"}  # fmt: skip
    reduced = bf16 and not bf16_native(args.device)
    batch = 1 if reduced else max(1, args.tokens // seq_len)
    cfg = InnerConfig(steps=1, micro_batch=batch, grad_clip=1.0, bf16_autocast=bf16)
    trainer = Trainer(ParallelConfig(compile=args.compile))
    beam_model = build_model(preset, seed=0, device=args.device)
    beam_opt = build_inner_optimizer(beam_model, cfg)
    plain_model = build_model(preset, seed=0, device=args.device)
    plain_opt = torch.optim.AdamW(plain_model.parameters(), lr=cfg.lr, betas=cfg.betas,
                                  eps=cfg.eps, weight_decay=cfg.weight_decay)  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    vocab = beam_model.config.vocab_size

    def batches() -> list:
        s = torch.randint(0, vocab, (batch, seq_len + 1), generator=gen)
        return [(s[:, :-1], s[:, 1:])]

    loops = {
        "beam": lambda b: trainer.train(beam_model, b, cfg, beam_opt),
        "plain": lambda b: _plain_loop(plain_model, b, plain_opt, bf16, args.device),
    }
    if reduced:  # the plain copy trains in fp32 instead: bf16's speed-up on the same batch
        fp32 = cfg.model_copy(update={"bf16_autocast": False})
        loops = {"beam": loops["beam"], "fp32": lambda b: trainer.train(plain_model, b, fp32,
                                                                       plain_opt)}  # fmt: skip
    else:  # one untimed step each: kernel selection, allocator warm-up, compilation
        for loop in loops.values():
            loop(batches())
    seconds = dict.fromkeys(loops, 0.0)
    steps = 0
    while steps == 0 or (not reduced and min(seconds.values()) < args.seconds):
        b = batches()
        order = list(loops) if steps % 2 else list(reversed(loops))
        for name in order:
            seconds[name] += _timed(lambda n=name, b=b: loops[n](b), args.device)
        steps += 1
    tokens = steps * batch * seq_len
    beam_tps = tokens / seconds["beam"]
    plain_tps = tokens / seconds["plain"] if "plain" in seconds else None
    fp32_tps = tokens / seconds["fp32"] if "fp32" in seconds else None
    peak = peak_tflops(args.device, bf16)
    flops = flops_per_token(beam_model.config, seq_len)
    return {
        "preset": preset, "seq_len": seq_len, "precision": "bf16" if bf16 else "fp32",
        "batch": batch, "steps": steps, "reduced": reduced,
        "beam_tokens_per_s": round(beam_tps, 1),
        "plain_tokens_per_s": round(plain_tps, 1) if plain_tps else None,
        "overhead_ratio": round(plain_tps / beam_tps, 4) if plain_tps else None,
        "fp32_same_batch_tokens_per_s": round(fp32_tps, 1) if fp32_tps else None,
        "tflops": round(beam_tps * flops / 1e12, 4),
        "mfu": round(beam_tps * flops / (peak * 1e12), 4) if peak else None,
    }  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    """Every cell of the grid; return the JSON record."""
    setup(args.threads)
    started, load_start = time.perf_counter(), round(os.getloadavg()[0], 2)
    cells = []
    for preset in args.presets.split(","):
        for seq_len in (int(s) for s in args.seq_lens.split(",")):
            for precision in args.precisions.split(","):
                cells.append(run_cell(args, preset, seq_len, precision == "bf16"))
    ratios = [c["overhead_ratio"] for c in cells if c.get("overhead_ratio") is not None]
    speedups = {
        f"{f['preset']}@{f['seq_len']}": round(
            b["beam_tokens_per_s"] / (b["fp32_same_batch_tokens_per_s"] or f["beam_tokens_per_s"]), 3
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
        "tokens_per_step": args.tokens,
        "seconds_per_cell": args.seconds,
        "compile": args.compile,
        "cells": cells,
        "bf16_speedup_over_fp32": speedups,
        "worst_overhead_ratio": max(ratios) if ratios else None,
        "target_overhead": TARGET_OVERHEAD,
        "target_met": bool(ratios) and max(ratios) <= TARGET_OVERHEAD,
        "peak_tflops": "unknown" if peak_tflops(args.device, True) is None else "PEAK_TFLOPS",
        "wall_s": round(time.perf_counter() - started, 1),
        "env": env,
    }
