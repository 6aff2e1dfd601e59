"""Holder merge and validator window: time and peak memory against the number of uploads.

Synthetic uploads of ``--preset`` (default ``hypertrain-20m``): upload ``i`` is the compressed
``shared + noise_i`` (both seeded Gaussians), so supports overlap the way honest miners' do, and
upload 1 is upload 0 re-signed by another miner, so copy detection has one copy to find. Each is a
signed envelope, verified on the way in as the neurons do (``subnet.wire.verify_envelope``, then
the compressor's payload check).

* **holder**: verify every upload, merge them (median-norm clipping, then the configured rule)
  and take the outer step, as ``ModelHolder.step`` does.
* **validator**: verify every upload, evaluate each (loss on ``--eval-samples`` samples before
  and after ``theta - delta``, plus random samples), and detect copies, as ``Validator.step`` does.

Times are wall clock (``*_s``) and the process's CPU time over all its threads (``cpu_s``): on a
shared machine the wall time grows with the load, the CPU time much less. Each (role, count) runs
in a fresh process. Memory is the kernel's RSS high-water mark
(``getrusage(RUSAGE_SELF).ru_maxrss``) minus the RSS after setup (model built, uploads read into
memory as bytes), i.e. what the merge or window itself added; ``model_copies`` divides it by the
fp32 model size. ``--eager`` runs the code path before streaming (every upload decoded up front,
copy detection over Python sets) for comparison.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import resource
import time
from pathlib import Path

import torch
from bittensor.sp_core import Keypair

from benchmarks import scale_live
from benchmarks.common import environment, setup
from subnet.compression import CompressionConfig, build_compressor
from subnet.config import ProtocolConfig
from subnet.model import build_model, evaluate_loss
from subnet.scoring import ScoringConfig, Upload, detect_copies, index_overlap
from subnet.storage.keys import ObjectKind
from subnet.training import aggregate, build_outer_optimizer, load_parameters, snapshot
from subnet.training.streaming import merge_payloads
from subnet.wire import Expected, encode_envelope, verify_envelope

RUN, WINDOW, BASE = "beam-scale", 7, 3
MAX_BYTES = 1 << 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py scale``."""
    parser.add_argument("--preset", default="hypertrain-20m")
    parser.add_argument("--sizes", default="4,16,32,64", help="upload counts, comma-separated")
    parser.add_argument("--roles", default="holder,validator")
    parser.add_argument("--compressor", default=None, help="default: the protocol's default")
    parser.add_argument("--eval-samples", type=int, default=2, help="samples per evaluation")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--eager", action="store_true", help="the pre-streaming code path")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/beam-scale"),
                        help="where the synthetic uploads are kept between runs")  # fmt: skip
    scale_live.add_arguments(parser)


def _keypair(i: int) -> Keypair:
    return Keypair.create_from_seed(bytes([i % 256, i // 256]) + bytes(30))


def _uploads(args: argparse.Namespace, cfg: CompressionConfig, count: int) -> list[Path]:
    """Write (or reuse) ``count`` signed synthetic uploads; return their paths."""
    folder = args.cache / f"{args.preset}-{cfg.name}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{i}.beam" for i in range(count)]
    missing = [i for i, p in enumerate(paths) if not p.exists()]
    if not missing:
        return paths
    compressor = build_compressor(cfg)
    model = build_model(args.preset, seed=0)
    shared = {k: torch.randn(v.shape, generator=torch.Generator().manual_seed(0)) * 1e-3
              for k, v in model.named_parameters()}  # fmt: skip
    for i in missing:
        gen = torch.Generator().manual_seed(1 + (0 if i == 1 else i))  # upload 1 copies upload 0
        delta = {k: v + torch.randn(v.shape, generator=gen) * 1e-3 for k, v in shared.items()}
        blob = encode_envelope(signer=_keypair(i), run=RUN, kind=ObjectKind.GRADIENT,
                               window=WINDOW, tensors=compressor.encode(delta),
                               base_version=BASE)  # fmt: skip
        paths[i].write_bytes(blob)
    return paths


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def _verified(blobs: list[bytes], compressor, shapes) -> list[dict[str, torch.Tensor]]:
    """Verify each envelope and its payload as ``collect_uploads`` does; return the payloads."""
    out = []
    for i, blob in enumerate(blobs):
        expected = Expected(RUN, WINDOW, ObjectKind.GRADIENT, _keypair(i).ss58_address,
                            base_version=BASE)  # fmt: skip
        envelope = verify_envelope(blob, expected, None, max_bytes=MAX_BYTES)
        if compressor.validate(envelope.tensors, shapes) is not None:
            raise ValueError("synthetic upload failed validation")
        out.append(envelope.tensors)
    return out


def _sets_copies(supports: list, threshold: float) -> dict[int, int]:
    """The pre-streaming copy check: every pair's overlap of Python sets of global indices."""
    found = {}
    for j in range(len(supports)):
        for i in range(j):
            if index_overlap(supports[i], supports[j]) >= threshold:
                found[j] = i
                break
    return found


def holder_job(preset: str, paths: list[str], cfg: CompressionConfig, eager: bool,
               threads: int) -> dict:  # fmt: skip
    """One holder merge of ``paths`` in this (fresh) process."""
    setup(threads)
    p = ProtocolConfig(compression=cfg)
    compressor, model = build_compressor(cfg), build_model(preset, seed=0)
    params = snapshot(model)
    shapes = {k: tuple(v.shape) for k, v in params.items()}
    outer = build_outer_optimizer(p.outer)
    blobs = [Path(path).read_bytes() for path in paths]
    base = _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    payloads = _verified(blobs, compressor, shapes)
    weights = [1.0 + 0.01 * i for i in range(len(payloads))]
    if eager:
        deltas = [compressor.decode(pl, shapes) for pl in payloads]
        collected = time.perf_counter()
        delta = aggregate(deltas, weights, p.aggregation)
    else:
        collected = time.perf_counter()
        delta = merge_payloads(compressor, payloads, shapes, weights, p.aggregation)
    outer.step(params, delta)
    load_parameters(model, params)
    end = time.perf_counter()
    return _memory(base, model) | {
        "collect_s": round(collected - start, 3),
        "aggregate_and_step_s": round(end - collected, 3),
        "total_s": round(end - start, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
    }


def validator_job(preset: str, paths: list[str], cfg: CompressionConfig, eager: bool,
                  threads: int, eval_samples: int, seq_len: int) -> dict:  # fmt: skip
    """One validator window over ``paths`` in this (fresh) process."""
    setup(threads)
    compressor, model = build_compressor(cfg), build_model(preset, seed=0)
    state = snapshot(model)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, model.config.vocab_size, (2, eval_samples, seq_len + 1), generator=gen)
    assigned, random = [(x[0, :, :-1], x[0, :, 1:])], [(x[1, :, :-1], x[1, :, 1:])]
    blobs = [Path(path).read_bytes() for path in paths]
    base = _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    payloads = _verified(blobs, compressor, shapes)
    decoded = [compressor.decode(pl, shapes) for pl in payloads] if eager else None
    collected = time.perf_counter()
    evaluate_loss(model, random)
    for i, payload in enumerate(payloads):
        delta = decoded[i] if eager else compressor.decode(payload, shapes)
        evaluate_loss(model, assigned)
        load_parameters(model, {k: state[k] - delta[k] for k in state})
        evaluate_loss(model, assigned), evaluate_loss(model, random)
        load_parameters(model, state)
        del delta
    evaluated = time.perf_counter()
    threshold = ScoringConfig().copy_overlap
    if eager:
        supports = [_nonzero_set(d) for d in decoded]
        indexed = time.perf_counter()
        copies = _sets_copies(supports, threshold)
    else:
        uploads = [Upload(str(i), (i,), compressor.support(pl, shapes))
                   for i, pl in enumerate(payloads)]  # fmt: skip
        indexed = time.perf_counter()
        copies = {int(k): int(v) for k, v in detect_copies(uploads, ScoringConfig()).items()}
    end = time.perf_counter()
    return _memory(base, model) | {
        "collect_s": round(collected - start, 3),
        "evaluate_s": round(evaluated - collected, 3),
        "copy_detection_s": round(end - evaluated, 3),
        "supports_s": round(indexed - evaluated, 3),  # index sets from the uploads
        "pairwise_s": round(end - indexed, 3),  # the pairwise overlap check itself
        "total_s": round(end - start, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
        "copies_found": {str(k): str(v) for k, v in sorted(copies.items())},
    }


def _nonzero_set(delta: dict[str, torch.Tensor]) -> frozenset[int]:
    """Global flat indices of the non-zeros (the pre-streaming ``uploads.support``)."""
    indices, offset = [], 0
    for name in sorted(delta):
        flat = delta[name].reshape(-1)
        indices.extend((torch.nonzero(flat).reshape(-1) + offset).tolist())
        offset += flat.numel()
    return frozenset(indices)


def _memory(base_mb: float, model: torch.nn.Module) -> dict:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # kB on Linux
    model_mb = 4 * sum(p.numel() for p in model.parameters()) / 1e6
    return {
        "rss_after_setup_mb": round(base_mb, 1),
        "peak_rss_mb": round(peak, 1),
        "peak_above_setup_mb": round(peak - base_mb, 1),
        "model_copies": round((peak - base_mb) / model_mb, 2),
    }


def _in_fresh_process(fn, *args) -> dict:
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(fn, *args).result()


def run(args: argparse.Namespace) -> dict:
    """Generate the uploads once, then measure each role at each count in a fresh process
    (``--live``: a live local subnet instead, see ``benchmarks.scale_live``)."""
    if args.live:
        return scale_live.run_live(args)
    setup(args.threads)
    cfg = (
        CompressionConfig() if args.compressor is None else CompressionConfig(name=args.compressor)
    )
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.perf_counter()
    paths = [str(p) for p in _uploads(args, cfg, max(sizes))]
    upload_bytes = Path(paths[0]).stat().st_size
    results: dict[str, dict] = {}
    for role in args.roles.split(","):
        results[role] = {}
        for n in sizes:
            if role == "holder":
                job = (holder_job, args.preset, paths[:n], cfg, args.eager, args.threads)
            else:
                job = (validator_job, args.preset, paths[:n], cfg, args.eager, args.threads,
                       args.eval_samples, args.seq_len)  # fmt: skip
            results[role][str(n)] = _in_fresh_process(*job)
    return {
        "benchmark": "scale",
        "preset": args.preset,
        "compressor": cfg.name,
        "path": "eager (pre-streaming)" if args.eager else "streaming",
        "upload_bytes": upload_bytes,
        "eval_samples": args.eval_samples,
        "memory": "RSS high-water mark (ru_maxrss) minus RSS after setup, in a fresh process",
        "results": results,
        "seconds": round(time.perf_counter() - started, 1),
        "env": environment("cpu"),
    }
