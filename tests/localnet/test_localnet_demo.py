"""`make demo`'s script runs end to end: stack up, weights on chain, epoch, clean stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_sets_weights_and_shows_the_epoch():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count(": included") == 2  # both validators' weights accepted by the chain
    final = out.split("waiting for the epoch")[1]
    rows = {line.split()[1]: line.split() for line in final.splitlines() if "…" in line}
    assert [float(rows[m][5]) for m in ("miner1", "miner2", "miner3")] == [0.2, 0.3, 0.5]
    assert float(rows["validator1"][6]) == 0.5 and float(rows["validator2"][6]) == 0.5
    assert out.rstrip().endswith("local stack stopped cleanly")
