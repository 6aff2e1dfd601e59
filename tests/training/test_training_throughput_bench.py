"""The throughput benchmark's arithmetic and one real cell (the speed figures live in the benchmark)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks import throughput  # noqa: E402

from subnet.model import PRESETS  # noqa: E402


def test_flops_per_token_of_hypertrain_20m_by_hand() -> None:
    # matmuls: 6 x (4 x 256^2 + 3 x 256 x 1024) + 256 x 50,000 = 6,291,456 + 12,800,000
    # = 19,091,456 parameters; x 6 = 114,548,736; attention 12 x 6 x 256 x 64 = 1,179,648.
    assert throughput.flops_per_token(PRESETS["hypertrain-20m"], 64) == 114_548_736 + 1_179_648


def test_no_peak_and_no_mfu_on_a_cpu() -> None:
    assert throughput.peak_tflops("cpu", bf16=True) is None


def test_one_cell_trains_both_loops_and_reports_a_ratio() -> None:
    args = argparse.Namespace(device="cpu", tokens=64, seconds=0.01, compile=False, threads=1)
    cell = throughput.run_cell(args, "tiny", 16, bf16=False)
    assert (cell["batch"], cell["reduced"]) == (4, False)
    assert cell["steps"] >= 1 and cell["beam_tokens_per_s"] > 0 and cell["plain_tokens_per_s"] > 0
    ratio = cell["plain_tokens_per_s"] / cell["beam_tokens_per_s"]  # both rounded to 0.1 token/s
    assert cell["overhead_ratio"] == pytest.approx(ratio, rel=0.01)
    assert cell["mfu"] is None


def test_a_sequence_longer_than_the_context_is_skipped_with_the_reason() -> None:
    args = argparse.Namespace(device="cpu", tokens=512, seconds=0.01, compile=False, threads=1)
    cell = throughput.run_cell(args, "tiny", 256, bf16=False)
    assert cell["skipped"] == "seq_len 256 > the preset's context_len 128"
