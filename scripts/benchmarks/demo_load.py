"""`make demo` on a busy machine: the demo run while CPU burners compete for every core.

Starts ``--burners`` processes that spin (``while True: pass``), runs ``scripts/demo.py`` with
``--rounds`` rounds and W&B off, stops the burners, and reads the run folder: whether the demo
finished (exit 0), its wall time, the calibrated window, and how the miners fared against the
upload deadline (uploads on time, late, partial, windows skipped as too slow), what the pacemaker
did (block-time changes, the longest block and whose work needed it) and how many steps ended past
their phase. Loads the machine for as long as the demo runs: keep ``--rounds`` small on a shared
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, environment
from subnet.monitor.report.load import metrics_files, read_jsonl


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py demo_load``."""
    parser.add_argument("--rounds", type=int, default=3, help="merged rounds the demo runs")
    parser.add_argument("--burners", type=int, default=2, help="CPU-bound processes alongside")
    parser.add_argument("--timeout", type=int, default=900, help="give up after this many s")


def _outcomes(run_dir: Path) -> dict:
    """Counts from the run's metrics: rounds, uploads on time / late, partial, skipped."""
    counts = {"rounds_merged": 0, "uploads": 0, "uploads_late": 0, "uploads_partial": 0,
              "windows_skipped": 0, "holder_empty_windows": 0}  # fmt: skip
    for path in metrics_files(run_dir):
        for r in read_jsonl(path):
            event = r.get("event")
            if event == "version" and (r.get("version") or 0) > 0:
                counts["rounds_merged"] += 1
            elif event == "upload":
                counts["uploads"] += 1
                counts["uploads_late"] += bool(r.get("late"))
            elif event == "train" and (r.get("steps") or 0) < (r.get("steps_assigned") or 0):
                counts["uploads_partial"] += 1
            elif event == "window_skipped":
                counts["windows_skipped"] += 1
            elif event == "uploads" and r.get("empty"):
                counts["holder_empty_windows"] += 1
    return counts


def _paced(run_dir: Path) -> dict:
    """What the pacemaker did: its block-time changes, the longest block, who needed it."""
    path = run_dir / "pacemaker.jsonl"
    changes = read_jsonl(path) if path.exists() else []
    longest = max(changes, key=lambda r: r["block_s"], default=None)
    late = sum(
        1
        for metrics in metrics_files(run_dir)
        for r in read_jsonl(metrics)
        if r.get("event") == "step" and (r.get("end_offset") or 0) > r.get("last_offset", 1 << 30)
    )
    return {
        "block_time_changes": len(changes),
        "longest_block_s": longest["block_s"] if longest else None,
        "longest_for": f"{longest['source']}: {longest['detail']}" if longest else None,
        "steps_past_their_phase": late,
    }


def run(args: argparse.Namespace) -> dict:
    """Run the demo under load and return the JSON record."""
    burn = [subprocess.Popen(["python3", "-c", "while True: pass"]) for _ in range(args.burners)]
    run_dir = Path(tempfile.mkdtemp(prefix="beam-demo-load-"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    try:
        time.sleep(1.0)  # let the burners take the cores before the demo calibrates
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        proc = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "demo.py"), "--rounds", str(args.rounds),
             "--wandb", "disabled", "--run-dir", str(run_dir)],
            capture_output=True, text=True, timeout=args.timeout, cwd=REPO, env=env,
        )  # fmt: skip
    finally:
        for p in burn:
            p.kill()
            p.wait()
    wall = time.monotonic() - started
    return record(proc, run_dir, args.burners, args.rounds, wall, load)


def record(
    proc: subprocess.CompletedProcess,
    run_dir: Path,
    burners: int,
    rounds: int,
    wall: float,
    load: float | None = None,
) -> dict:
    """The benchmark's JSON record from a finished demo run (its process and run folder)."""
    out = proc.stdout
    calibrated = next((line for line in out.splitlines() if line.startswith("calibrated:")), "")
    window = re.search(r"window (\d+) blocks", calibrated)
    stall = next((line for line in out.splitlines() if line.startswith("timed out")), "")
    return {
        "benchmark": "demo_load",
        "burners": burners,
        "rounds_asked": rounds,
        "demo_exit_code": proc.returncode,
        "finished": proc.returncode == 0,
        "wall_seconds": round(wall, 1),
        "window_blocks": int(window[1]) if window else None,
        "calibration": calibrated,
        **_outcomes(run_dir),
        **_paced(run_dir),
        "stall_reason": stall or None,
        "last_lines": out.strip().splitlines()[-3:] + proc.stderr.strip().splitlines()[-2:],
        "run_dir": str(run_dir),
        "load_avg_1m_at_start": round(load, 2) if load is not None else None,
        "environment": environment("cpu"),
    }


if __name__ == "__main__":  # pragma: no cover - run through scripts/bench.py
    print(json.dumps(run(argparse.Namespace(rounds=3, burners=2, timeout=900))))
