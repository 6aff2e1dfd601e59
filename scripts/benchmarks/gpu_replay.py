"""A window trained on ``--device`` (a GPU) and checked by a validator's replay on the CPU.

What a GPU miner's upload faces (docs/protocol.md, checks of training): a miner trains one window
of ``--preset`` (``hypertrain-20m``) as the protocol says (H = ``inner.steps`` fp32 AdamW steps,
fresh optimizer warm-started at ``inner.moment_init``, on a public batch stream), then a second
window from its first window's error feedback, and uploads the second window's SparseLoCo
payload; a validator replays that window on the CPU from the same base model and batches and runs
the check on the chunks a beacon draws (``subnet.verify.check``), exactly as ``bench.py verify``
checks honest kernel paths. Reported: the check's error against the tolerance, whether it passed,
the relative difference of the two pseudo-gradients over the whole model, and the seconds of the
device's window and of the CPU replay. The batches are seeded random tokens, so no dataset is
needed on the GPU machine. ``--device cpu`` runs the same comparison CPU against CPU (error 0).
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from benchmarks.common import environment, setup, sync
from subnet.compression import ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.model import build_model
from subnet.neuron.replay import PROBE_NOISE, Replayer
from subnet.training import build_inner_optimizer, load_parameters, pseudo_gradient, train_inner
from subnet.verify.check import check, chunks_for, levels, spread
from subnet.verify.chunks import ChunkMap
from subnet.verify.draw import chunk_sample


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py gpu_replay``."""
    parser.add_argument("--preset", default="hypertrain-20m")
    parser.add_argument("--inner-steps", type=int, default=None, help="H (default: protocol)")
    parser.add_argument("--draws", type=int, default=4, help="beacons drawn for the check")


def _batches(vocab: int, window: int, inner, seq_len: int) -> list:
    gen = torch.Generator().manual_seed(1_000 + window)
    x = torch.randint(0, vocab, (inner.steps, inner.micro_batch, seq_len + 1), generator=gen)
    return [(b[:, :-1], b[:, 1:]) for b in x]


def _window(model, base: dict, batches: list, inner, device: str) -> tuple[dict, float]:
    """Train one window from ``base`` on ``device``; the pseudo-gradient (CPU fp32), seconds."""
    load_parameters(model, base)
    sync(device)
    started = time.perf_counter()
    train_inner(model, batches, inner, build_inner_optimizer(model, inner))
    sync(device)
    seconds = time.perf_counter() - started
    delta = pseudo_gradient(base, model)
    return {k: v.to("cpu") for k, v in delta.items()}, seconds


def run(args: argparse.Namespace) -> dict:
    """Train two windows on ``--device``, replay the second on the CPU, check; the record."""
    setup(args.threads)
    p = ProtocolConfig()
    inner = (
        p.inner
        if args.inner_steps is None
        else p.inner.model_copy(update={"steps": args.inner_steps})
    )
    miner = build_model(args.preset, seed=0, device=args.device)
    cpu = build_model(args.preset, seed=0, device="cpu")
    vocab = miner.config.vocab_size
    comp = build_compressor(p.compression)
    ef = ErrorFeedback(p.compression.ef_decay)
    base0 = {k: v.detach().clone() for k, v in miner.state_dict().items()}
    first, _ = _window(miner, base0, _batches(vocab, 0, inner, p.seq_len), inner, args.device)
    _, decoded0 = ef.compress(comp, first)
    base1 = {k: (v.to("cpu") - p.outer.lr * decoded0[k]).to(args.device) for k, v in base0.items()}
    batches = _batches(vocab, 1, inner, p.seq_len)
    before = ef.state_dict()
    delta, device_s = _window(miner, base1, batches, inner, args.device)
    _, decoded = ef.compress(comp, delta)
    after = ef.state_dict()
    cpu_base = {k: v.to("cpu") for k, v in base1.items()}
    replayed, replay_s = _window(cpu, cpu_base, batches, inner, "cpu")
    cpu_batches = [tuple(t.to("cpu") for t in batch) for batch in batches]
    probe = Replayer(cpu, inner).replay(cpu_base, cpu_batches, inner.steps, noise=PROBE_NOISE)
    spreads = []
    shapes = {k: tuple(v.shape) for k, v in delta.items()}
    chunks = ChunkMap.of(shapes, p.compression.chunk)
    books = levels(decoded)
    outcomes = []
    for d in range(args.draws):
        ids = chunk_sample(
            f"{d:064x}", p.run, "grads", 1, "gpu-miner", chunks, p.scoring.check_chunks
        )
        parts = chunks_for(
            chunks,
            ids,
            replayed,
            chunks.chunks(before, ids),
            chunks.chunks(after, ids),
            decoded,
            p.compression.topk,
        )
        ef_in = chunks.chunks(before, ids)
        spreads.append(spread(chunks, ids, replayed, probe, ef_in, p.compression.ef_decay))
        tolerance = max(p.scoring.check_tolerance, p.scoring.check_margin * spreads[-1])
        outcomes.append(check(parts, p.compression.ef_decay, tolerance, "sparse", books))
    num = sum(float((delta[k] - replayed[k]).double().pow(2).sum()) for k in delta)
    den = sum(float(replayed[k].double().pow(2).sum()) for k in delta)
    env = environment(args.device)
    return {
        "benchmark": "gpu_replay",
        "defaults": "the protocol's inner settings, codec and check",
        "preset": args.preset,
        "params": sum(t.numel() for t in cpu.parameters()),
        "inner_steps": inner.steps,
        "miner_device": args.device,
        "replay_device": "cpu",
        "check_error_max": max(o.error for o in outcomes),
        "check_tolerance": p.scoring.check_tolerance,
        "honest_spread_max": max(spreads),
        "check_margin": p.scoring.check_margin,
        "checks_passed": sum(o.ok for o in outcomes),
        "checks": len(outcomes),
        "reasons": sorted({o.reason for o in outcomes if o.reason}),
        "update_relative_difference": math.sqrt(num / den) if den else 0.0,
        "device_window_s": round(device_s, 3),
        "cpu_replay_s": round(replay_s, 3),
        "passed": all(o.ok for o in outcomes),
        "env": env,
    }
