"""One rank of the 2-rank trainer tests, started like torchrun would (RANK, WORLD_SIZE, MASTER_*).

Rank 0 trains two windows of the `tiny` preset through `Trainer`, computes the pseudo-gradient and
the SparseLoCo upload with error feedback exactly as the miner does, and saves them; other ranks
serve. ``--die R`` simulates a crash (exit without a word): rank R > 0 right after joining, rank 0
after its first window. Without ``WORLD_SIZE`` in the environment it trains alone, as one rank.

The kernel path is the process's own: ``ATEN_CPU_CAPABILITY`` and ``MKL_ENABLE_INSTRUCTIONS`` in
its environment, and ``--threads``. The tests and ``scripts/bench.py numerics`` start it on other
paths than the reference's, so a tolerance measured on one path only fails on every machine.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from loguru import logger

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.training import InnerConfig, build_inner_optimizer, pseudo_gradient, snapshot
from subnet.training.distributed import RankFailure, launch
from subnet.training.parallel import ParallelConfig
from subnet.training.trainer import Trainer

INNER = InnerConfig(steps=3, micro_batch=4, accumulation=2, lr=3e-3)


def window_batches(window: int, vocab: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The samples one window trains on: the same for every run of the test."""
    gen = torch.Generator().manual_seed(100 + window)
    n = INNER.steps * INNER.accumulation
    seqs = torch.randint(0, vocab, (n, INNER.micro_batch, 17), generator=gen)
    return [(s[:, :-1], s[:, 1:]) for s in seqs]


def codec_input(ef: ErrorFeedback, delta: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What ``ef.compress`` is about to encode: ``decay * residual + delta`` (the same float ops)."""
    out = {}
    for name, value in delta.items():
        previous = ef.buffers.get(name)
        value = value.detach().float()
        out[name] = value.clone() if previous is None else previous.mul(ef.decay).add_(value)
    return out


def train_windows(
    trainer: Trainer, windows: int = 2, die_after: int = -1, device: str = "cpu"
) -> dict[str, object]:
    """What a miner would upload for each window (payload tensors), plus the raw deltas and the
    codec's inputs (delta plus error feedback)."""
    from subnet.model import build_model
    from subnet.training import load_parameters

    model = build_model("tiny", seed=0, device=device)
    optimizer = build_inner_optimizer(model, INNER)
    ef = ErrorFeedback(0.95)
    compressor = build_compressor(CompressionConfig())
    out: dict[str, object] = {}
    for w in range(windows):
        start = snapshot(model)
        result = trainer.train(model, window_batches(w, model.config.vocab_size), INNER, optimizer)
        delta = pseudo_gradient(start, model)
        out[f"input{w}"] = codec_input(ef, delta)
        payload, _ = ef.compress(compressor, delta)
        out[f"delta{w}"], out[f"payload{w}"], out[f"loss{w}"] = delta, payload, result.mean_loss
        out[f"tokens{w}"] = result.tokens
        # The global model moves by the (here: our own) update, as after a merge.
        load_parameters(model, {k: start[k] - delta[k] for k in start})
        if w == die_after:
            os._exit(3)
    return out


def replay_window(ranks: int) -> dict[str, object]:
    """Window 0 replayed as a validator replays a miner's (``subnet.neuron.replay``): from the
    same model and samples, with a fresh AdamW, computing ``ranks`` ranks' gradients."""
    from subnet.model import build_model
    from subnet.neuron.replay import Replayer

    model = build_model("tiny", seed=0)
    base = snapshot(model)
    batches = window_batches(0, model.config.vocab_size)
    return {"delta0": Replayer(model, INNER).replay(base, batches, INNER.steps, ranks=ranks)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ddp")
    parser.add_argument("--out", required=True)
    parser.add_argument("--die", type=int, default=-1, help="this rank crashes (see above)")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--replay-ranks", type=int, default=0, help="replay window 0 on this many ranks instead"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logger.remove()
    logger.add(sys.stderr, format="{message}")
    if args.replay_ranks:
        torch.save(replay_window(args.replay_ranks), args.out)
        return 0
    if "WORLD_SIZE" not in os.environ:  # one rank, no process group
        torch.save(train_windows(Trainer(), device=args.device), args.out)
        return 0
    config = ParallelConfig(mode=args.mode, timeout_s=args.timeout, idle_timeout_s=args.timeout)
    try:
        with launch(config, args.device, INNER.micro_batch) as group:
            assert group is not None
            if group.rank == args.die and args.die > 0:
                os._exit(3)
            if not group.is_main:
                return group.serve()
            die_after = 0 if args.die == 0 else -1
            out = train_windows(Trainer(config), die_after=die_after, device=args.device)
            torch.save(out, args.out)
    except RankFailure as error:
        logger.error("miner stopped: {}", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
