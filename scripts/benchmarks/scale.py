"""Holder merge and validator window: time and peak memory against the number of uploads.

Synthetic uploads of ``--preset`` (default ``hypertrain-20m``) with the protocol's codec: upload
``i`` is the compressed ``shared + noise_i`` (both seeded Gaussians), so supports overlap the way
honest miners' do, and upload 1 is upload 0 re-signed by another miner, so copy detection has one
copy to find. Each is a signed envelope, verified on the way in as the neurons do
(``subnet.wire.verify_envelope``, then the compressor's payload check).

* **holder**: verify every upload, merge them (the protocol's aggregation: median-norm clipping,
  then the mean) and take the protocol's outer step, as the holder's merge (``subnet.neuron.merger``) does.
* **validator**: verify every upload, evaluate each (loss on ``--eval-samples`` samples before
  and after ``theta - delta``, plus random samples, in the miners' micro-batches), and check for
  copies against this window and the ``scoring.history_windows`` windows before it, whose
  fingerprints the validator holds (``subnet.scoring.FingerprintLog``), as ``Validator`` does.
  ``--keep indices`` keeps the whole index sets instead, as validators did before fingerprints.

Each (role, count) runs in a fresh process. **Memory** is the peak of the measured stage: the
kernel's high-water mark (``VmHWM``) is reset when the stage starts (after the model is built and
the uploads are read into memory as bytes), and the RSS at that moment is subtracted;
``model_copies`` divides the rest by the fp32 model's size. **Times** are wall clock (``*_s``) and
the process's CPU time over all its threads (``cpu_s``): on a shared machine the wall time grows
with the load, the CPU time much less. ``--eager`` runs the code path before streaming (every
upload decoded up front) for comparison.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import time
from pathlib import Path

import numpy as np
import torch
from bittensor.sp_core import Keypair

from benchmarks import scale_live, scale_total
from benchmarks.common import PeakMemory, environment, setup
from subnet.compression import CompressionConfig, build_compressor
from subnet.config import ProtocolConfig
from subnet.model import build_model, evaluate_loss
from subnet.scoring import FingerprintLog, find_matches
from subnet.scoring.overlap import as_sorted_array
from subnet.storage.keys import PROTOCOL_VERSION, ObjectKind
from subnet.training import aggregate, build_outer_optimizer, load_parameters, snapshot
from subnet.training.streaming import merge_payloads
from subnet.wire import Expected, encode_envelope, verify_envelope

RUN, WINDOW, BASE = "beam-scale", 7, 3
MAX_BYTES = 1 << 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py scale``."""
    parser.add_argument("--preset", default="hypertrain-20m")
    parser.add_argument("--sizes", default="4,16,64,256", help="upload counts, comma-separated")
    parser.add_argument(
        "--roles",
        default="holder,validator,validator-total",
        help="holder, validator (every upload evaluated: the cost sampling avoids), "
        "validator-total (the shipped validator's whole window, in miner-windows)",
    )
    parser.add_argument("--compressor", default=None, help="default: the protocol's default")
    parser.add_argument(
        "--eval-samples", type=int, default=8, help="samples per evaluation (one micro-batch)"
    )
    parser.add_argument("--seq-len", type=int, default=ProtocolConfig().seq_len)
    parser.add_argument("--eager", action="store_true", help="the pre-streaming code path")
    parser.add_argument(
        "--keep",
        choices=("fingerprints", "indices"),
        default="fingerprints",
        help="what the validator keeps of past windows' uploads (indices: before fingerprints)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path("/tmp/beam-scale"),
        help="where the synthetic uploads are kept between runs",
    )
    scale_live.add_arguments(parser)


def _keypair(i: int) -> Keypair:
    return Keypair.create_from_seed(bytes([i % 256, i // 256]) + bytes(30))


def _uploads(args: argparse.Namespace, cfg: CompressionConfig, count: int) -> list[Path]:
    """Write (or reuse) ``count`` signed synthetic uploads; return their paths."""
    # Keyed by the wire's version: envelopes an older version wrote are refused (wrong_version).
    folder = args.cache / f"v{PROTOCOL_VERSION}-{args.preset}-{cfg.name}"
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


def _verified(
    blobs: list[bytes], compressor, shapes, measure=None, measured: list | None = None
) -> list[dict[str, torch.Tensor]]:
    """Verify each envelope and its payload as ``collect_uploads`` does; return the payloads.
    With ``measure`` (``payload -> anything``; it validates, as the validator's does) each
    payload is read by it instead of ``validate`` and what it returns appended to
    ``measured``."""
    out = []
    for i, blob in enumerate(blobs):
        expected = Expected(RUN, WINDOW, ObjectKind.GRADIENT, _keypair(i).ss58_address,
                            base_version=BASE)  # fmt: skip
        envelope = verify_envelope(blob, expected, None, max_bytes=MAX_BYTES)
        if measure is not None and measured is not None:
            measured.append(measure(envelope.tensors))
        elif compressor.validate(envelope.tensors, shapes) is not None:
            raise ValueError("synthetic upload failed validation")
        out.append(envelope.tensors)
    return out


def _model_bytes(model: torch.nn.Module) -> int:
    return 4 * sum(p.numel() for p in model.parameters())


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
    memory = PeakMemory()
    memory.start()
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
    return memory.stop(_model_bytes(model)) | {
        "collect_s": round(collected - start, 3),
        "aggregate_and_step_s": round(end - collected, 3),
        "total_s": round(end - start, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
    }


def _history(log: FingerprintLog, supports: list, windows: int, numel: int) -> None:
    """Fill ``log`` with ``windows`` earlier windows of fingerprints, one per upload each: this
    window's index sets shifted by a window-dependent offset (other sets of the same size and
    structure, as a steady state after ``windows`` windows would hold). Each set is reduced to
    its fingerprint as it is made, as a validator does one upload at a time (``_measure``); all
    of a window's sets at once would be the bench's own transient (2.3 MB each at 20M)."""
    for back in range(windows, 0, -1):
        sets = enumerate(supports())
        shifted = {str(i): log.of(np.sort((s + 7919 * back) % numel)) for i, s in sets}
        log.record(WINDOW - back, shifted)


def validator_job(
    preset: str,
    paths: list[str],
    cfg: CompressionConfig,
    eager: bool,
    threads: int,
    eval_samples: int,
    seq_len: int,
    keep: str,
) -> dict:
    """One validator window over ``paths`` in this (fresh) process, its copy checks holding the
    fingerprints of ``history_windows`` earlier windows (``keep``: ``fingerprints``, as Beam
    does, or ``indices``, the full index sets kept before)."""
    setup(threads)
    p = ProtocolConfig(compression=cfg)
    compressor, model = build_compressor(cfg), build_model(preset, seed=0)
    state = snapshot(model)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    numel = sum(v.numel() for v in state.values())
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, model.config.vocab_size, (2, eval_samples, seq_len + 1), generator=gen)
    mb = p.inner.micro_batch  # the validator evaluates in the miners' micro-batches

    def batches(i: int) -> list:
        return [(x[i, s : s + mb, :-1], x[i, s : s + mb, 1:]) for s in range(0, eval_samples, mb)]

    assigned, random = batches(0), batches(1)
    blobs = [Path(path).read_bytes() for path in paths]
    memory = PeakMemory()
    memory.start()
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
    log = (IndexLog if keep == "indices" else FingerprintLog)(p.scoring.history_windows)

    def supports():
        return (compressor.support(pl, shapes) for pl in payloads)

    _history(log, supports, p.scoring.history_windows, numel)
    kept_bytes = _kept_bytes(log)
    indexed = time.perf_counter()
    prints = {str(i): log.of(s) for i, s in enumerate(supports())}
    matches = find_matches(WINDOW, prints, log.recent(WINDOW), p.scoring)
    log.record(WINDOW, prints)
    end = time.perf_counter()
    copies = sorted({(m.hotkey, m.source) for m in matches if m.window == WINDOW})
    return memory.stop(_model_bytes(model)) | {
        "collect_s": round(collected - start, 3),
        "evaluate_s": round(evaluated - collected, 3),
        "history_s": round(indexed - evaluated, 3),  # the earlier windows' fingerprints (setup)
        "copy_detection_s": round(end - indexed, 3),  # this window's prints and every match
        "kept_fingerprint_bytes": kept_bytes,
        "kept_bytes_per_upload": round(kept_bytes / max(1, len(log.entries) - len(payloads))),
        "total_s": round(end - start, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
        "copies_found": [list(pair) for pair in copies],
    }


class IndexLog(FingerprintLog):
    """The log as it was before fingerprints: every upload's index set kept whole."""

    def of(self, indices):  # noqa: D102
        return None if indices is None else as_sorted_array(indices)

    def record(self, window: int, uploads) -> None:  # noqa: D102
        for hotkey, indices in uploads.items():
            self.entries[(window, hotkey)] = as_sorted_array(indices)  # type: ignore[assignment]
        self.entries = {k: v for k, v in self.entries.items() if k[0] > window - self.keep}


def _kept_bytes(log: FingerprintLog) -> int:
    return sum(v.nbytes for v in log.entries.values())


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
            elif role == "validator-total":
                job = (scale_total.validator_total_job, args.preset, paths[:n], cfg, args.threads)
                job += (_verified,)
            else:
                job = (validator_job, args.preset, paths[:n], cfg, args.eager, args.threads)
                job += (args.eval_samples, args.seq_len, args.keep)
            results[role][str(n)] = _in_fresh_process(*job)
    p = ProtocolConfig(compression=cfg)
    total = results.get("validator-total", {})
    return {
        "benchmark": "scale",
        "validator_total_miner_windows": {n: r["total_miner_windows"] for n, r in total.items()},
        "validator_total_model_copies": {n: r.get("model_copies") for n, r in total.items()},
        "validator_download_bytes": {n: r["download_bytes"] for n, r in total.items()},
        "newcomer_windows_to_90pct": {
            f"{v}_validators": scale_total.newcomer_windows(64, v, p) for v in (2, 16)
        },
        "preset": args.preset,
        "compressor": cfg.name,
        "defaults": "the protocol's codec, aggregation, outer step and history_windows",
        "path": "eager (pre-streaming)" if args.eager else "streaming",
        "validator_keeps": args.keep,
        "upload_bytes": upload_bytes,
        "eval_samples": args.eval_samples,
        "memory": "peak RSS of the measured stage (VmHWM reset at its start) minus the RSS at "
        "its start, in a fresh process",
        "results": results,
        "seconds": round(time.perf_counter() - started, 1),
        "env": environment("cpu"),
    }
