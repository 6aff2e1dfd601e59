"""What re-sparsifying the broadcast costs in loss: the same training with and without it.

``bench.py broadcast --loss`` trains ``--preset`` (``tiny`` by default) with R simulated workers
exactly as ``bench.py convergence`` runs SparseLoCo (the same token streams, H AdamW steps per
round, ``sparseloco-rice`` uploads with the senders' error feedback, mean, outer SGD lr 2), once
per way of publishing: ``exact`` applies the merged step as is (what the lossless patch broadcast
publishes), and for each ``--budget`` b, ``sparse`` (b = 1) or ``sparse_xb`` publishes the step
re-sparsified to b times one upload's top-k with the holder's error feedback
(``subnet.versions.delta.Resparsifier``), and the next round starts from that. The held-out loss
after every round, and the signed envelope each peer downloads per round (patch vs delta), are
reported for each.
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import ensure_dataset, environment, setup
from benchmarks.convergence import METHODS, _streams, publish_version, worker_round
from subnet.compression import ErrorFeedback, build_compressor
from subnet.data import TokenDataset
from subnet.model import build_model, evaluate_loss
from subnet.training import (
    InnerConfig,
    aggregate,
    build_inner_optimizer,
    build_outer_optimizer,
    load_parameters,
    snapshot,
)
from subnet.versions.delta import Resparsifier


def _train(args: argparse.Namespace, ds: TokenDataset, streams: list, budget: int) -> dict:
    comp_cfg, outer_cfg, agg_cfg = METHODS["sparseloco"]
    compressor = build_compressor(comp_cfg)
    inner = InnerConfig(lr=args.lr, steps=args.inner_steps, micro_batch=args.micro_batch)
    model = build_model(args.preset, vocab_size=ds.vocab_size, seed=0)
    workers = [build_model(args.preset, vocab_size=ds.vocab_size, seed=0) for _ in streams]
    optimizers = [build_inner_optimizer(w, inner) for w in workers]
    feedback = [ErrorFeedback(comp_cfg.ef_decay) for _ in streams]
    outer = build_outer_optimizer(outer_cfg)
    spars = Resparsifier(comp_cfg, budget) if budget else None
    heldout = list(ds.heldout_batches(args.micro_batch, args.eval_batches))
    losses, down, up = [], 0, 0
    for rnd in range(args.rounds):
        start = snapshot(model)
        decoded, sent = worker_round(workers, optimizers, feedback, streams, start, rnd, inner,
                                     compressor)  # fmt: skip
        up += sent
        target = {k: v.clone() for k, v in start.items()}
        outer.step(target, aggregate(decoded, None, agg_cfg))
        target, sent = publish_version(start, target, spars)
        down += sent
        load_parameters(model, target)
        losses.append(round(evaluate_loss(model, heldout), 4))
    return {"heldout_loss": losses, "final_loss": losses[-1],
            "upload_bytes_per_worker_per_round": round(up / len(streams) / args.rounds),
            "download_bytes_per_peer_per_round": round(down / args.rounds)}  # fmt: skip


def budgets(args: argparse.Namespace) -> list[int]:
    """The ``--budget`` list (multiples of the upload's top-k)."""
    return [int(b) for b in str(getattr(args, "budget", "1")).split(",") if b.strip()]


def lane_name(budget: int) -> str:
    """``sparse`` for one upload's budget (the record's old key), ``sparse_x4`` for 4 times."""
    return "sparse" if budget == 1 else f"sparse_x{budget}"


def run_loss(args: argparse.Namespace) -> dict:
    """Train with and without the re-sparsified broadcast; return the JSON record."""
    setup(args.threads)
    torch.manual_seed(0)
    ds = TokenDataset.from_folder(ensure_dataset(args.data), seq_len=args.seq_len)
    streams = _streams(ds, list(range(ds.split_samples("train"))), 0, args)  # the whole train split
    runs = {"exact": _train(args, ds, streams, 0)}
    runs |= {lane_name(b): _train(args, ds, streams, b) for b in budgets(args)}
    exact = runs["exact"]["final_loss"]
    ratios = {f"{name}_loss_over_exact": round(run["final_loss"] / exact, 4)
              for name, run in runs.items() if name != "exact"}  # fmt: skip
    return {"benchmark": "broadcast-loss", "preset": args.preset, "workers": args.workers,
            "inner_steps": args.inner_steps, "rounds": args.rounds, **runs, **ratios,
            "env": environment("cpu")}  # fmt: skip
