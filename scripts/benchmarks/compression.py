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

import torch

from benchmarks.common import best_ms, envelope_bytes, environment, setup, sync
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
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions (best is reported)")


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


def _row(name: str, grad: dict[str, torch.Tensor], args: argparse.Namespace) -> tuple[dict, dict]:
    compressor = build_compressor(CompressionConfig(name=name))
    shapes = {k: tuple(v.shape) for k, v in grad.items()}
    payload = compressor.encode(grad)
    decoded = compressor.decode(payload, shapes)
    tensor_bytes = payload_nbytes(payload)
    nbytes = envelope_bytes(payload)
    numel = sum(t.numel() for t in grad.values())
    err = sum(float((decoded[k] - grad[k]).pow(2).sum()) for k in grad) ** 0.5
    norm = sum(float(g.pow(2).sum()) for g in grad.values()) ** 0.5
    ef = ErrorFeedback(CompressionConfig().ef_decay)
    row = {
        "bytes_per_merge": nbytes,
        "mb_per_merge": round(nbytes / 1e6, 4),
        "tensor_bytes": tensor_bytes,
        "overhead_bytes": nbytes - tensor_bytes,
        "ratio_vs_fp32": round(4 * numel / nbytes, 2),
        "bits_per_param": round(8 * nbytes / numel, 4),
        "relative_error": round(err / norm, 4),
        "encode_ms": round(best_ms(lambda: compressor.encode(grad), args.reps, args.device), 2),
        "decode_ms": round(
            best_ms(lambda: compressor.decode(payload, shapes), args.reps, args.device), 2
        ),
        "encode_with_error_feedback_ms": round(
            best_ms(lambda: ef.compress(compressor, grad), args.reps, args.device), 2
        ),
    }
    return row, decoded


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
        "encode_ms": round(best_ms(lambda: encode_patch(base, target), 1, args.device), 1),
        "apply_ms": round(best_ms(lambda: apply_patch(base, patch), 1, args.device), 1),
    }


def run(args: argparse.Namespace) -> dict:
    """Measure every compressor in the registry; return the JSON record."""
    setup(args.threads)
    grad, model = _pseudo_gradient(args)
    numel = sum(t.numel() for t in grad.values())
    rows, sparse_decoded = {}, {}
    for name in COMPRESSORS:
        rows[name], decoded = _row(name, grad, args)
        if name == "sparseloco":
            sparse_decoded = decoded
    target = rows[TARGET_NAME]
    return {
        "benchmark": "compression",
        "preset": args.preset,
        "params": numel,
        "fp32_bytes": 4 * numel,
        "input": f"pseudo-gradient after {args.inner_steps} AdamW steps on random tokens",
        "compressors": rows,
        "model_patch_after_sparseloco_merge": _patch_row(model, sparse_decoded, args),
        "target": f"{TARGET_NAME} signed envelope <= {TARGET_BYTES} B and >= {TARGET_RATIO}x",
        "target_met": target["bytes_per_merge"] <= TARGET_BYTES
        and target["ratio_vs_fp32"] >= TARGET_RATIO,
        "env": environment(args.device),
    }
