"""The costs part of ``bench.py verify`` (``verify.py``'s module doc): bytes and seconds of one
checked window, and the per-N figures they give."""

from __future__ import annotations

import argparse
import math
import time

from benchmarks.common import SIGNER, ensure_dataset
from subnet.compression import ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.data import TokenDataset, sample_receipt
from subnet.model import build_model
from subnet.neuron.answers import commitments
from subnet.storage.keys import ObjectKind
from subnet.training import build_inner_optimizer, load_parameters, pseudo_gradient, train_inner
from subnet.verify.answer import encode_answer, parse_answer
from subnet.verify.check import Chunk, check, chunks_for, levels
from subnet.verify.chunks import ChunkMap
from subnet.verify.draw import chunk_sample, places
from subnet.wire import encode_envelope
from subnet.wire.schema import GradientMeta

SIZES = (16, 64, 256)


def _envelope(tensors: dict, kind: ObjectKind, metadata: dict | None = None) -> int:
    blob = encode_envelope(
        signer=SIGNER,
        run="beam-bench",
        kind=kind,
        window=123_456,
        tensors=tensors,
        base_version=1_234,
        metadata=metadata or {},
    )
    return len(blob)


def costs(args: argparse.Namespace, p: ProtocolConfig) -> dict:
    """Bytes and seconds of one checked window of ``--cost-preset`` (see the module doc)."""
    folder = args.cost_data
    data = TokenDataset.from_folder(ensure_dataset(folder), seq_len=p.seq_len)
    model = build_model(args.cost_preset, vocab_size=data.vocab_size, seed=0)
    comp = build_compressor(p.compression)
    ef, inner = ErrorFeedback(p.compression.ef_decay), p.inner
    shapes = {n: tuple(t.shape) for n, t in model.state_dict().items()}
    chunks = ChunkMap.of(shapes, p.compression.chunk)
    per = inner.steps * inner.micro_batch
    record: dict = {
        "preset": args.cost_preset,
        "params": sum(t.numel() for t in model.parameters()),
        "inner_steps": inner.steps,
        "chunks": chunks.n,
    }
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for w in range(2):
        ids = list(range(w * per, (w + 1) * per))
        load_parameters(model, base)
        started = time.perf_counter()
        train_inner(
            model, data.batches(ids, inner.micro_batch), inner, build_inner_optimizer(model, inner)
        )
        delta = pseudo_gradient(base, model)
        trained = time.perf_counter() - started
        before = ef.state_dict()
        payload, decoded = ef.compress(comp, delta)
        after = ef.state_dict()
        roots = chunks.commit(before), chunks.commit(after)
        record["miner_window_s"] = round(time.perf_counter() - started, 3)
        record["miner_train_s"] = round(trained, 3)
    meta = {
        "receipt": sample_receipt(ids),
        "samples": str(per),
        "steps": str(inner.steps),
        "tokens": str(per * p.seq_len),
        "loss": "5.123456",
        "state_in": roots[0],
        "state_from": "0",
        "state_out": roots[1],
    }
    upload = _envelope(payload, ObjectKind.GRADIENT, meta)
    draw = "ab" * 32
    sample = chunk_sample(draw, p.run, "grads", 1, "miner", chunks, p.scoring.check_chunks)
    answer_tensors = encode_answer(chunks, sample, before, after)
    answer = _envelope(answer_tensors, ObjectKind.CHECK_ANSWER)
    # The validator: parse the answer, replay the window, compare.
    started = time.perf_counter()
    proven = parse_answer(chunks, sample, answer_tensors, *roots)
    parsed = time.perf_counter() - started
    started = time.perf_counter()
    load_parameters(model, base)
    train_inner(
        model, data.batches(ids, inner.micro_batch), inner, build_inner_optimizer(model, inner)
    )
    replayed = pseudo_gradient(base, model)
    replay_s = time.perf_counter() - started
    started = time.perf_counter()
    parts = chunks_for(
        chunks, sample, replayed, proven.ef_in, proven.ef_out, decoded, p.compression.topk
    )
    outcome = check(
        parts, p.compression.ef_decay, p.scoring.check_tolerance, "sparse", levels(decoded)
    )
    compare_s = time.perf_counter() - started + parsed
    started = time.perf_counter()
    for _ in range(1000):  # the per-upload part: commitments parsed, a link compared
        commitments(GradientMeta.parse(meta, window=2), 2)
    per_upload_s = (time.perf_counter() - started) / 1000
    notice = _envelope({}, ObjectKind.CHECKS, {"targets": SIGNER.ss58_address, "verdicts": ""})
    window_s = record["miner_window_s"]
    record |= {
        "upload_bytes": upload,
        "answer_bytes": answer,
        "answer_chunks": len(sample),
        "notice_bytes": notice,
        "replay_s": round(replay_s, 3),
        "compare_s": round(compare_s, 3),
        "per_upload_s": per_upload_s,
        "replay_over_window": round(replay_s / window_s, 3),
        "check_passed": outcome.ok,
        "check_error": outcome.error,
        "input_over_update": round(input_ratio(parts), 3),
    }
    return record | _tables(record, p)


def _tables(record: dict, p: ProtocolConfig) -> dict:
    """The per-N figures from one window's measurements."""
    s = p.scoring
    mean, peak, down, compute, single = {}, {}, {}, {}, {}
    for n in SIZES:
        v = min(64, n // 4)
        k = places(n, v, s.checks, s.check_share)
        mean[str(n)] = round(k / n * record["answer_bytes"] / record["upload_bytes"], 3)
        peak[str(n)] = round(record["answer_bytes"] / record["upload_bytes"], 3)
        extra = s.checks * record["answer_bytes"] + (v - 1) * record["notice_bytes"]
        down[str(n)] = round((n * record["upload_bytes"] + extra) / (n * record["upload_bytes"]), 4)
        # Worst case: every check also runs its chaos probe (a check beyond check_tolerance,
        # as every honest one on hypertrain-20m across kernel paths); 1 replay a check without.
        replays = 2 if s.check_margin > 0 else 1
        seconds = (
            s.checks * (replays * record["replay_s"] + record["compare_s"])
            + n * record["per_upload_s"]
        )
        compute[str(n)] = round(seconds / record["miner_window_s"], 3)
        alone = s.checks * (record["replay_s"] + record["compare_s"]) + n * record["per_upload_s"]
        single[str(n)] = round(alone / record["miner_window_s"], 3)
    # Loss-based scoring (every upload): 3 forward passes over eval_samples own samples and 1
    # over as many random ones, against a window's H x micro_batch samples forward and back
    # (about 3 forward passes each).
    scoring = 4 * p.eval_samples / (3 * p.inner.steps * p.inner.micro_batch)
    return {
        "validators": {str(n): min(64, n // 4) for n in SIZES},
        "miner_bytes_mean_over_upload": mean,
        "miner_bytes_max_over_upload": peak,
        "validator_download_over_uploads": down,
        "validator_compute_miner_windows": compute,
        "validator_compute_miner_windows_no_probe": single,
        "scoring_compute_miner_windows_per_upload": round(scoring, 3),
    }


def input_ratio(parts: list[Chunk]) -> float:
    """``||u'|| / ||delta'||`` on the drawn chunks (the codec input over the update)."""
    u = sum(float((0.95 * c.ef_in + c.replayed).double().pow(2).sum()) for c in parts)
    d = sum(float(c.replayed.double().pow(2).sum()) for c in parts)
    return math.sqrt(u / d) if d else math.inf
