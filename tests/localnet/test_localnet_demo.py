"""`make demo`'s script end to end, shortened to two rounds: it trains, reports and stops."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from benchmarks import demo_load  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the demo lengthens its window on a loaded machine
def test_demo_runs_rounds_writes_the_run_page_and_stops_everything(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        # The default headroom: the pacemaker lengthens the windows when the load that the
        # calibration saw grows (make test's other worker, CPU burners).
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--rounds", "2", "--wandb",
         "disabled", "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=1400, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    match = re.search(r"held-out loss ([\d.]+) -> ([\d.]+)", out)
    assert match and float(match[2]) < float(match[1]), out
    # DDP against a miner's bytes both ways; a run whose rounds each merged one miner (under
    # load one may be late every window) has no ring to compare with, and says so.
    merged = [int(m[1]) for m in re.finditer(r"^\s+\d+\s+\d+\s+(\d+)\s", out, re.M)]
    assert merged and min(merged) >= 1, out
    if max(merged) >= 2:
        assert re.search(
            r"a DDP worker .+ moves .+ up \+ down a round, a miner .+: [\d,]+x less", out
        ), out
    else:
        assert "DDP: one worker per round, nothing to all-reduce" in out, out
    # Incentive shows on the metagraph (for some miner: in two rounds one miner may miss its
    # first window while it starts, and score 0 in the other when its proof falls short).
    chain = out.split("weights on chain")[1]
    assert re.search(r"miner\d\s+incentive (?!0\.000)\d\.\d{3}", chain), chain
    assert f"run page: {run_dir / 'report.html'}" in out
    assert (run_dir / "report.html").stat().st_size > 5000
    assert out.rstrip().endswith("all processes stopped")
    assert re.search(r"^calibrated: one inner step takes [\d.]+ s", out, re.M), out
    # It says up front how long it will take, then where it is while nothing merges.
    assert re.search(r"^expected: about \d+ minutes here", out, re.M), out
    assert re.search(r"^  \[\d+:\d\d\] window \d+, block \d+/\d+: .+; \d of 2 rounds", out, re.M), (
        out
    )
    assert (run_dir / "chain.json").exists()  # incentive for the run page
    # `bench.py demo_load`'s record of this run (its tiny variant: no burners, two rounds)
    record = demo_load.record(proc, run_dir, burners=0, rounds=2, wall=0.0)
    assert record["finished"] and record["rounds_merged"] >= 2, record
    assert record["window_blocks"] and record["uploads"] >= record["uploads_late"] >= 0, record
