"""A GPU's replay class: two runs of one window agree bit for bit, a validator on the same GPU
passes the check, a CPU validator is never drawn, and what determinism costs.

For each precision (``fp32``, ``bf16`` autocast), on ``--device``: one protocol window of
``--preset`` (``hypertrain-20m``) trained with the device's default settings and then with the
replay class's deterministic ones (``subnet.verify.classes.deterministic``: deterministic
algorithms, cuBLAS's fixed workspace, no TF32, no reduced-precision bf16 reductions),
``--reps`` times each, interleaved, after a warm-up: tokens/s of each and their ratio. Then the
deterministic window twice from the same base and batches: whether the two pseudo-gradients
(the codec's input) are bitwise equal; and the validator's replay of it (``Replayer``, the
checker's own code, at the upload's precision) on the same device, checked on beacon-drawn
chunks as a validator checks (``subnet.verify.check``). Last, a CPU validator's ``ClassBook``
given an upload of this class: whether its draw would name it (it must not).

``--device cpu`` runs every step on the CPU (what the test does); deterministic settings are
CUDA's, so both settings there are the same.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.common import environment, setup, sync
from subnet.compression import ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.model import build_model
from subnet.neuron.class_book import ClassBook
from subnet.neuron.replay import Replayer
from subnet.training import build_inner_optimizer, load_parameters, pseudo_gradient, train_inner
from subnet.verify.check import check, chunks_for, levels
from subnet.verify.chunks import ChunkMap
from subnet.verify.classes import PRECISIONS, ReplayClass, deterministic, of_machine
from subnet.verify.draw import chunk_sample


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py gpu_class``."""
    parser.add_argument("--preset", default="hypertrain-20m")
    parser.add_argument("--inner-steps", type=int, default=None, help="H (default: protocol)")
    parser.add_argument("--reps", type=int, default=3, help="timed windows per setting")
    parser.add_argument("--draws", type=int, default=4, help="beacons drawn for the check")


def _window(model, base: dict, batches: list, inner, device: str) -> tuple[dict, float]:
    load_parameters(model, base)
    sync(device)
    started = time.perf_counter()
    train_inner(model, batches, inner, build_inner_optimizer(model, inner))
    sync(device)
    seconds = time.perf_counter() - started
    return {k: v.detach().clone() for k, v in pseudo_gradient(base, model).items()}, seconds


def _set_default(device: str) -> None:
    """The device's default settings (what a miner without a replay class runs)."""
    if torch.device(device).type == "cuda":
        torch.use_deterministic_algorithms(False)
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        torch.backends.cudnn.deterministic = False


def _precision(args, p: ProtocolConfig, precision: str) -> dict:
    inner = p.inner.model_copy(
        update={
            "bf16_autocast": precision == "bf16",
            **({} if args.inner_steps is None else {"steps": args.inner_steps}),
        }
    )
    model = build_model(args.preset, seed=0, device=args.device)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(7)
    x = torch.randint(0, vocab, (inner.steps, inner.micro_batch, p.seq_len + 1), generator=gen)
    batches = [(b[:, :-1].to(args.device), b[:, 1:].to(args.device)) for b in x]
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    tokens = inner.steps * inner.micro_batch * p.seq_len
    _set_default(args.device)
    _window(model, base, batches, inner, args.device)  # warm-up
    free, held = [], []
    for _ in range(args.reps):  # interleaved, so drift on a busy machine hits both alike
        _set_default(args.device)
        free.append(_window(model, base, batches, inner, args.device)[1])
        settings = deterministic(args.device)
        held.append(_window(model, base, batches, inner, args.device)[1])
    first, _ = _window(model, base, batches, inner, args.device)
    second, _ = _window(model, base, batches, inner, args.device)
    bitwise = all(torch.equal(first[k], second[k]) for k in first)
    # The miner's upload of that window, and the validator's replay on the same device
    comp, ef = build_compressor(p.compression), ErrorFeedback(p.compression.ef_decay)
    cpu = {k: v.to("cpu") for k, v in first.items()}
    before = ef.state_dict()
    _, decoded = ef.compress(comp, cpu)
    after = ef.state_dict()
    cls = of_machine(args.device, precision)
    validator = Replayer(build_model(args.preset, seed=0, device=args.device), inner)
    replayed = validator.replay(base, batches, inner.steps, bf16=ReplayClass.parse(str(cls)).bf16)
    chunks = ChunkMap.of({k: tuple(v.shape) for k, v in cpu.items()}, p.compression.chunk)
    outcomes = []
    for d in range(args.draws):
        ids = chunk_sample(f"{d:064x}", p.run, "grads", 1, "gpu", chunks, p.scoring.check_chunks)
        parts = chunks_for(
            chunks,
            ids,
            replayed,
            chunks.chunks(before, ids),
            chunks.chunks(after, ids),
            decoded,
            p.compression.topk,
        )
        outcomes.append(
            check(
                parts, p.compression.ef_decay, p.scoring.check_tolerance, "sparse", levels(decoded)
            )
        )
    free_s, held_s = sorted(free)[len(free) // 2], sorted(held)[len(held) // 2]
    return {
        "class": str(cls),
        "deterministic_settings": settings,
        "tokens_per_s_default": round(tokens / free_s, 1),
        "tokens_per_s_deterministic": round(tokens / held_s, 1),
        "deterministic_cost": round(held_s / free_s, 3),
        "two_runs_bitwise": bitwise,
        "replay_check_error_max": max(o.error for o in outcomes),
        "replay_checks_passed": sum(o.ok for o in outcomes),
        "replay_checks": len(outcomes),
    }


def run(args: argparse.Namespace) -> dict:
    """Both precisions on ``--device``; the record."""
    setup(args.threads)
    p = ProtocolConfig()
    record: dict = {"benchmark": "gpu_class", "preset": args.preset, "device": args.device}
    for precision in PRECISIONS:
        record[precision] = _precision(args, p, precision)
    # A CPU validator (the pinned class) is given an upload of each class: it draws none of them
    software = ReplayClass.parse(record["fp32"]["class"]).software
    cpu = ClassBook([f"cpu-avx2-mkl.avx2/{q}/{software}" for q in PRECISIONS])
    drawn = []
    for precision in PRECISIONS:
        cpu.observe(precision, record[precision]["class"], 0)
        drawn.append(cpu.mine(precision))
    on_gpu = torch.device(args.device).type == "cuda"
    record["cpu_validator_draws_it"] = any(drawn) if on_gpu else None
    record["passed"] = (
        all(
            record[q]["two_runs_bitwise"] and record[q]["replay_checks_passed"] == args.draws
            for q in PRECISIONS
        )
        and not record["cpu_validator_draws_it"]
    )
    record["env"] = environment(args.device)
    return record
