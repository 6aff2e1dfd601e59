"""A validator's whole window against the number of uploads, in miner-windows (``bench.py
scale``'s ``validator-total`` role), and how soon an honest newcomer is paid its share.

One window of ``--preset`` in a fresh process, as ``Validator`` spends it, each part timed:

* **collect**: every upload's envelope verified and its payload checked, its support and norm
  read in the same parse (``Compressor.measure``, as the validator's collect does);
* **screens**: the matches of every upload's copy fingerprint (taken in the collect) against
  the recent windows, and the validator's sample;
* **scoring**: the window's shared reference (the clipped mean of at most ``COMMON_MOST``
  uploads) and the ``scoring.evaluations`` uploads the validator's sample holds (the
  protocol's ``eval_samples`` own and random samples, through
  ``subnet.scoring.assess.assess_window``);
* **checks**: ``scoring.checks`` replays of a miner's window through the validator's own
  ``Replayer`` (``inner.steps`` steps and the pseudo-gradient, as a check trains them again;
  no compression: a check compares the drawn chunks only, and the answer's proofs and the
  comparison are a fraction of a second).

A **miner-window** is measured in the same process first: ``inner.steps`` AdamW steps of the
preset on ``micro_batch`` sequences of ``seq_len`` tokens, the pseudo-gradient and its
compression. Tokens are uniform random ids (the costs do not depend on the text).

The newcomer figure is a simulation of the two draws (``subnet.verify.draw`` for checks,
``subnet.scoring.sample`` for evaluations) at ``V`` validators: the windows until an honest
sender that joins a running network is paid at least 90 % of an established one's weight by
the holder (the median over validators of their standing: each must have checked it and
evaluated it once; its standing is then its score).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from benchmarks.common import PeakMemory, setup
from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.model import build_model
from subnet.neuron.replay import Replayer
from subnet.scoring import FingerprintLog, find_matches
from subnet.scoring.assess import WindowProbe, assess_window
from subnet.scoring.sample import evaluated
from subnet.training import (
    build_inner_optimizer,
    load_parameters,
    pseudo_gradient,
    snapshot,
    train_inner,
)
from subnet.verify.draw import targets


def _batches(tokens: torch.Tensor, ids, mb: int):
    rows = tokens[list(ids)]
    return [(rows[s : s + mb, :-1], rows[s : s + mb, 1:]) for s in range(0, len(rows), mb)]


def _window(model, tokens: torch.Tensor, p: ProtocolConfig) -> float:
    """One miner-window's seconds: ``H`` steps, the pseudo-gradient, its compression."""
    inner, base = p.inner, snapshot(model)
    ids = range(inner.steps * inner.micro_batch * inner.accumulation)
    started = time.perf_counter()
    train_inner(model, _batches(tokens, ids, inner.micro_batch), inner,
                build_inner_optimizer(model, inner))  # fmt: skip
    delta = pseudo_gradient(base, model)
    ErrorFeedback(p.compression.ef_decay).compress(build_compressor(p.compression), delta)
    seconds = time.perf_counter() - started
    load_parameters(model, base)
    return seconds


def validator_total_job(
    preset: str, paths: list[str], cfg: CompressionConfig, threads: int, verified
) -> dict:
    """One validator window over ``paths`` (see the module doc); ``verified``: the envelope
    reader of ``scale.py`` (``_verified``), passed in to keep one copy of it."""
    setup(threads)
    p = ProtocolConfig(compression=cfg)
    compressor, model = build_compressor(cfg), build_model(preset, seed=0)
    state = snapshot(model)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    gen = torch.Generator().manual_seed(0)
    rows = max(p.inner.steps * p.inner.micro_batch * p.inner.accumulation, 4 * p.eval_samples)
    tokens = torch.randint(0, model.config.vocab_size, (rows, p.seq_len + 1), generator=gen)
    _window(model, tokens, p)  # warm-up
    window_s = statistics.median(_window(model, tokens, p) for _ in range(2))
    blobs = [Path(path).read_bytes() for path in paths]
    memory = PeakMemory()
    memory.start()
    t0 = time.perf_counter()
    log = FingerprintLog(p.scoring.history_windows)

    def measure(payload):  # as the validator's assessor: the fingerprint kept, not the support
        support, norm = compressor.measure(payload, shapes)
        return log.of(support), norm

    prints_and_norms: list = []
    payloads = verified(blobs, compressor, shapes, measure, prints_and_norms)
    t1 = time.perf_counter()
    names = [str(i) for i in range(len(payloads))]
    measured = dict(zip(names, prints_and_norms, strict=True))
    norms = {n: norm for n, (_, norm) in measured.items()}
    prints = {n: fingerprint for n, (fingerprint, _) in measured.items()}
    find_matches(7, prints, log.recent(7), p.scoring)
    deltas = _Lazy(compressor, dict(zip(names, payloads, strict=True)), shapes)
    sample = evaluated("beacon", "run", "grads", 7, names, (), ["v"], "v", p.scoring.evaluations)
    t2 = time.perf_counter()
    probe = WindowProbe(model, state, lambda ids: _batches(tokens, ids, p.inner.micro_batch))
    own = {n: list(range(p.eval_samples)) for n in names}
    random_ids = list(range(p.eval_samples, 2 * p.eval_samples))
    assess_window(probe, deltas, own, random_ids, norms=norms, measured=sample)
    t3 = time.perf_counter()
    replayer = Replayer(model, p.inner)
    window_ids = range(p.inner.steps * p.inner.micro_batch * p.inner.accumulation)
    batches = _batches(tokens, window_ids, p.inner.micro_batch)
    for _ in range(p.scoring.checks):  # a check trains the window again
        replayer.replay(state, batches, p.inner.steps)
    load_parameters(model, state)
    t4 = time.perf_counter()
    parts = {"collect": t1 - t0, "screens": t2 - t1, "scoring": t3 - t2, "checks": t4 - t3}
    return memory.stop(4 * sum(v.numel() for v in state.values())) | {
        "miner_window_s": round(window_s, 3),
        "evaluated": len(sample),
        "seconds": {k: round(v, 3) for k, v in parts.items()},
        "miner_windows": {k: round(v / window_s, 3) for k, v in parts.items()},
        "total_miner_windows": round(sum(parts.values()) / window_s, 3),
        "download_bytes": sum(len(b) for b in blobs),
    }


class _Lazy(dict):
    """``name -> decoded update``, decoded on every access (one alive at a time)."""

    def __init__(self, compressor, payloads: dict, shapes: dict) -> None:
        super().__init__(payloads)
        self.compressor, self.shapes = compressor, shapes

    def __getitem__(self, name: str):
        return self.compressor.decode(super().__getitem__(name), self.shapes)

    def add_into(self, name: str, into: dict, weight: float) -> None:
        """As the validator's uploads do (``Decoded.add_into``): only what the codec sent."""
        payload = super().__getitem__(name)
        self.compressor.add_into(payload, self.shapes, into, None, 1.0, weight)


def newcomer_windows(
    miners: int, validators: int, p: ProtocolConfig, trials: int = 40, share: float = 0.9
) -> dict:
    """Windows until an honest newcomer joining ``miners - 1`` established, verified and
    evaluated senders is weighted at ``share`` of one of them by the holder's median."""
    vals = [f"v{i}" for i in range(validators)]
    others = [f"m{i}" for i in range(miners - 1)]
    everyone = [*others, "new"]
    s = p.scoring
    took = []
    for trial in range(trials):
        verified = {v: set(others) for v in vals}
        scored = {v: set(others) for v in vals}
        named: dict[str, dict[str, int]] = {v: {} for v in vals}
        window = 0
        while True:
            beacon = f"n{trial}w{window}"
            for v in vals:
                # its sample this window, from what it could pay before the window's checks
                pay = sorted(verified[v]) if s.checks else everyone
                fresh = [hk for hk in pay if hk not in scored[v]]
                scored[v] |= evaluated(beacon, "r", "g", window, pay, fresh, vals, v,
                                       s.evaluations)  # fmt: skip
                for hk in targets(beacon, "r", "g", window, everyone, verified[v], vals, v,
                                  s.checks, s.check_share, named[v]):  # fmt: skip
                    verified[v].add(hk)
                    named[v][hk] = window
            window += 1
            paid = [1.0 if "new" in scored[v] and "new" in verified[v] else 0.0 for v in vals]
            if statistics.median(paid) >= share:
                break
        took.append(window)
    return {
        "miners": miners,
        "validators": validators,
        "mean": round(statistics.fmean(took), 2),
        "p90": sorted(took)[int(0.9 * (len(took) - 1))],
        "max": max(took),
    }
