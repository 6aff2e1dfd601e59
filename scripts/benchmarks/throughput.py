"""Tokens per second of Beam's inner loop against a plain PyTorch loop, side by side.

Both loops train their own copy of the same seeded model on the same batches, with the same AdamW
settings and gradient clipping; they alternate in short timed bursts so that load from anything
else on the machine hits both alike. ``overhead_ratio`` is plain tokens/s over Beam's tokens/s:
1.00 means Beam's loop costs nothing extra.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from benchmarks.common import environment, setup, sync
from subnet.model import build_model
from subnet.training import InnerConfig, build_inner_optimizer, train_inner

TARGET_OVERHEAD = 1.05


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py throughput``."""
    parser.add_argument("--preset", default="small")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps per timed burst")
    parser.add_argument("--bursts", type=int, default=16, help="timed bursts per loop")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast in both loops")


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


def run(args: argparse.Namespace) -> dict:
    """Alternate timed bursts of both loops; return the JSON record."""
    setup(args.threads)
    cfg = InnerConfig(steps=args.steps, grad_clip=1.0, bf16_autocast=args.bf16)
    beam_model = build_model(args.preset, seed=0, device=args.device)
    plain_model = build_model(args.preset, seed=0, device=args.device)
    beam_opt = build_inner_optimizer(beam_model, cfg)
    # Same hyperparameters, built the plain way.
    plain_opt = torch.optim.AdamW(
        plain_model.parameters(),
        lr=cfg.lr,
        betas=cfg.betas,
        eps=cfg.eps,
        weight_decay=cfg.weight_decay,
    )
    vocab = beam_model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(
        0, vocab, (args.bursts + 1, args.steps, args.batch, args.seq_len + 1), generator=gen
    )
    seconds = {"beam": 0.0, "plain": 0.0}
    for burst in range(args.bursts + 1):  # burst 0 warms both up and is not counted
        batches = [(s[:, :-1], s[:, 1:]) for s in x[burst]]
        order = ("beam", "plain") if burst % 2 else ("plain", "beam")
        for name in order:
            sync(args.device)
            start = time.perf_counter()
            if name == "beam":
                train_inner(beam_model, batches, cfg, optimizer=beam_opt)
            else:
                _plain_loop(plain_model, batches, plain_opt, args.bf16, args.device)
            sync(args.device)
            if burst:
                seconds[name] += time.perf_counter() - start
    tokens = args.bursts * args.steps * args.batch * args.seq_len
    beam_tps, plain_tps = tokens / seconds["beam"], tokens / seconds["plain"]
    return {
        "benchmark": "throughput",
        "preset": args.preset,
        "tokens_per_loop": tokens,
        "beam_tokens_per_s": round(beam_tps, 1),
        "plain_tokens_per_s": round(plain_tps, 1),
        "overhead_ratio": round(plain_tps / beam_tps, 4),
        "target_overhead": TARGET_OVERHEAD,
        "target_met": plain_tps / beam_tps <= TARGET_OVERHEAD,
        "bf16": args.bf16,
        "env": environment(args.device),
    }
