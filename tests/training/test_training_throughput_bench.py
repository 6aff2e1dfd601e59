"""The throughput benchmark's arithmetic and one real cell (the speed figures live in the benchmark)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks import throughput  # noqa: E402

from subnet.model import PRESETS  # noqa: E402


def test_flops_per_token_of_hypertrain_20m_by_hand() -> None:
    # matmuls: 6 x (4 x 256^2 + 3 x 256 x 1024) + 256 x 50,000 = 6,291,456 + 12,800,000
    # = 19,091,456 parameters; x 6 = 114,548,736; attention 12 x 6 x 256 x 64 = 1,179,648.
    assert throughput.flops_per_token(PRESETS["hypertrain-20m"], 64) == 114_548_736 + 1_179_648


def test_no_peak_and_no_mfu_on_a_cpu() -> None:
    assert throughput.peak_tflops("cpu", bf16=True) is None


ARGS = dict(device="cpu", compile=False, threads=1, reps=3, warmup=1, burst_seconds=0.01)


def test_one_cell_trains_both_loops_and_reports_a_median_ratio_with_its_spread() -> None:
    args = argparse.Namespace(tokens=64, **ARGS)
    cell = throughput.run_cell(args, "tiny", 16, bf16=False)
    assert (cell["batch"], cell["reduced"], cell["reps"]) == (4, False, 3)
    assert cell["burst_steps"] >= 1 and cell["beam_tokens_per_s"] > 0
    low, high = cell["overhead_ratio_spread"]
    assert 0 < low <= cell["overhead_ratio"] <= high
    low, high = cell["beam_tokens_per_s_spread"]
    assert low <= cell["beam_tokens_per_s"] <= high
    assert cell["mfu"] is None


def test_a_sequence_longer_than_the_context_is_skipped_with_the_reason() -> None:
    args = argparse.Namespace(tokens=512, **ARGS)
    cell = throughput.run_cell(args, "tiny", 256, bf16=False)
    assert cell["skipped"] == "seq_len 256 > the preset's context_len 128"
