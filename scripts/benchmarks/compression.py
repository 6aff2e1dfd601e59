"""Bytes per merge and codec speed for every registered compressor on ``hypertrain-20m``.

The input is a real pseudo-gradient, not synthetic noise: ``hypertrain-20m`` (19,094,784
parameters) is built, trained for ``--inner-steps`` AdamW steps on random tokens, and
``start - end`` is compressed. AdamW's near-sign updates give it the flat-topped, heavy-tailed
shape real pseudo-gradients have.

Every size is the object that crosses the network: ``bytes_per_merge`` is the signed envelope one
miner PUTs per round (magic, signed JSON header, signature, safetensors table and metadata as the
miner writes them, tensors); ``ratio_vs_fp32`` divides 4 bytes per parameter by it. The parts are
given too: ``tensor_bytes`` (the payload's tensors alone) and ``overhead_bytes`` (everything else in
the envelope). The model-patch row is the lossless broadcast of the version a SparseLoCo merge
produces, also as its signed envelope.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.common import envelope_bytes, environment, median_ms, median_spread, setup, sync
from subnet.compression import (
    COMPRESSORS,
    CompressionConfig,
    ErrorFeedback,
    apply_patch,
    build_compressor,
    encode_patch,
    payload_nbytes,
)
from subnet.model import build_model
from subnet.storage.keys import ObjectKind
from subnet.training import InnerConfig, pseudo_gradient, snapshot, train_inner

TARGET_NAME = "sparseloco-rice"
TARGET_BYTES = 370_000  # 0.37 MB signed envelope: 206x against fp32 for this model
TARGET_RATIO = 206


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py compression``."""
    parser.add_argument("--preset", default="hypertrain-20m")
    parser.add_argument(
        "--inner-steps", type=int, default=4, help="AdamW steps that make the pseudo-gradient"
    )
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument(
        "--reps", type=int, default=7, help="timed repetitions (median and spread are reported)"
    )


def _pseudo_gradient(args: argparse.Namespace) -> tuple[dict[str, torch.Tensor], torch.nn.Module]:
    model = build_model(args.preset, seed=0, device=args.device)
    start = snapshot(model)
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    batches = []
    for _ in range(args.inner_steps):
        x = torch.randint(0, vocab, (args.batch, args.seq_len + 1), generator=gen)
        batches.append((x[:, :-1], x[:, 1:]))
    train_inner(model, batches, InnerConfig(steps=args.inner_steps, lr=1e-3))
    return pseudo_gradient(start, model), model


def _sizes(name: str, grad: dict[str, torch.Tensor]) -> tuple[dict, dict]:
    """Bytes and error of one codec on ``grad``; and its decode (for the patch row)."""
    compressor = build_compressor(CompressionConfig(name=name))
    shapes = {k: tuple(v.shape) for k, v in grad.items()}
    payload = compressor.encode(grad)
    decoded = compressor.decode(payload, shapes)
    tensor_bytes = payload_nbytes(payload)
    nbytes = envelope_bytes(payload)
    numel = sum(t.numel() for t in grad.values())
    err = sum(float((decoded[k] - grad[k]).pow(2).sum()) for k in grad) ** 0.5
    norm = sum(float(g.pow(2).sum()) for g in grad.values()) ** 0.5
    return {
        "bytes_per_merge": nbytes,
        "mb_per_merge": round(nbytes / 1e6, 4),
        "tensor_bytes": tensor_bytes,
        "overhead_bytes": nbytes - tensor_bytes,
        "ratio_vs_fp32": round(4 * numel / nbytes, 2),
        "bits_per_param": round(8 * nbytes / numel, 4),
        "relative_error": round(err / norm, 4),
    }, decoded


def _timings(names: list[str], grad: dict[str, torch.Tensor], args: argparse.Namespace) -> dict:
    """Encode, decode and encode + error feedback of every codec: one untimed warm-up call of
    each, then ``--reps`` rounds in which every codec's three operations are timed once, the
    codecs in a rotating order (so load that hits one round hits every codec); median, min and
    max per operation, in ms. The error feedback is the sender's, carried across calls as a
    miner's is across rounds."""
    shapes = {k: tuple(v.shape) for k, v in grad.items()}
    ops = {}
    for name in names:
        compressor = build_compressor(CompressionConfig(name=name))
        payload = compressor.encode(grad)
        ef = ErrorFeedback(CompressionConfig().ef_decay)
        ops[name] = {
            "encode": lambda c=compressor: c.encode(grad),
            "decode": lambda c=compressor, p=payload: c.decode(p, shapes),
            "encode_with_error_feedback": lambda c=compressor, e=ef: e.compress(c, grad),
        }
    times: dict[str, dict[str, list[float]]] = {n: {op: [] for op in ops[n]} for n in names}
    for name in names:
        for fn in ops[name].values():
            fn()  # warm-up
    for rep in range(args.reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            for op, fn in ops[name].items():
                sync(args.device)
                start = time.perf_counter()
                fn()
                sync(args.device)
                times[name][op].append((time.perf_counter() - start) * 1e3)
    out: dict = {}
    for name in names:
        row = {}
        for op, values in times[name].items():
            stats = median_spread(values)
            row[f"{op}_ms"] = round(stats["median"], 1)
            row[f"{op}_ms_spread"] = [round(stats["min"], 1), round(stats["max"], 1)]
        out[name] = row
    return out


def _patch_row(
    model: torch.nn.Module, decoded: dict[str, torch.Tensor], args: argparse.Namespace
) -> dict:
    """Patch from v to v+1 = v - 1.0 * one SparseLoCo update (plain outer SGD, as SparseLoCo)."""
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    target = {k: (v - decoded[k]) if k in decoded else v.clone() for k, v in base.items()}
    patch = encode_patch(base, target)
    sync(args.device)
    return {
        "bytes": envelope_bytes(patch, ObjectKind.MODEL_PATCH),
        "tensor_bytes": payload_nbytes(patch),
        "changed_values": int(patch["counts"].sum()),
        "encode_ms": median_ms(lambda: encode_patch(base, target), args.reps, args.device),
        "apply_ms": median_ms(lambda: apply_patch(base, patch), args.reps, args.device),
    }


def run(args: argparse.Namespace) -> dict:
    """Measure every compressor in the registry; return the JSON record."""
    setup(args.threads)
    grad, model = _pseudo_gradient(args)
    numel = sum(t.numel() for t in grad.values())
    rows, sparse_decoded = {}, {}
    for name in COMPRESSORS:
        rows[name], decoded = _sizes(name, grad)
        if name == "sparseloco":
            sparse_decoded = decoded
    for name, timing in _timings(list(COMPRESSORS), grad, args).items():
        rows[name] |= timing
    target = rows[TARGET_NAME]
    return {
        "benchmark": "compression",
        "preset": args.preset,
        "params": numel,
        "fp32_bytes": 4 * numel,
        "input": f"pseudo-gradient after {args.inner_steps} AdamW steps on random tokens",
        "defaults": "each codec at the protocol's settings (CompressionConfig()), error feedback "
        "at the protocol's decay",
        "timing": f"median of {args.reps} interleaved repetitions after a warm-up; "
        "spread = [min, max]",
        "compressors": rows,
        "model_patch_after_sparseloco_merge": _patch_row(model, sparse_decoded, args),
        "target": f"{TARGET_NAME} signed envelope <= {TARGET_BYTES} B and >= {TARGET_RATIO}x",
        "target_met": target["bytes_per_merge"] <= TARGET_BYTES
        and target["ratio_vs_fp32"] >= TARGET_RATIO,
        "env": environment(args.device),
    }
