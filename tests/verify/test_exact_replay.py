"""A validator's replay of a single-process miner's window is bit for bit the miner's training,
when both run on the kernels ``subnet.kernels`` pins and the replay uses the miner's threads.

The miner here stands for another CPU: MKL held to its AVX2 instructions, 2 threads; the
validator runs on 1 thread with MKL free. Without the miner's thread count the same replay
differs in the last bits (the control), which a chaotic window grows to 1e-3 (docs/protocol.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from subnet.kernels import CUDA_PINNED, PINNED, pin, replay_warning

WORKER = Path(__file__).with_name("exact_worker.py")


def _run(role: str, data: Path, out: Path, threads: int, *extra: str, **env: str) -> dict:
    kernels = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")
    environ = {k: v for k, v in os.environ.items() if k not in kernels}
    environ |= {**PINNED, **env, "OMP_NUM_THREADS": str(threads)}
    cmd = [sys.executable, str(WORKER), role, str(data), str(out), *extra]
    done = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return torch.load(out, weights_only=False)


def test_a_replay_on_the_miners_threads_is_its_training_bit_for_bit(
    iambic_1024: Path, tmp_path: Path
) -> None:
    data = iambic_1024 / "iambic-v1024"
    miner = _run("miner", data, tmp_path / "m.pt", 2, MKL_ENABLE_INSTRUCTIONS="AVX2")
    assert (miner["threads"], miner["capability"]) == (2, "AVX2")
    exact = _run("validator", data, tmp_path / "v.pt", 1, "--claim", str(miner["threads"]))
    own = _run("validator", data, tmp_path / "own.pt", 1)
    assert own["threads"] == 1 and exact["threads"] == 1  # the replay put its own count back
    for name, value in miner["delta"].items():
        assert torch.equal(exact["delta"][name], value), name
    assert any(not torch.equal(own["delta"][k], v) for k, v in miner["delta"].items())


def test_pin_sets_what_is_unset_and_names_what_the_operator_set_otherwise() -> None:
    env: dict[str, str] = {}
    assert pin(env) == [] and env == PINNED | CUDA_PINNED
    env = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "avx2", "CUBLAS_WORKSPACE_CONFIG": ":16:8"}
    assert pin(env) == ["ATEN_CPU_CAPABILITY=default"]
    # left as set (any documented cuBLAS workspace is deterministic, so it is not named)
    assert env == {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "avx2",
        "CUBLAS_WORKSPACE_CONFIG": ":16:8",
    }
    assert "ATEN_CPU_CAPABILITY=default" in (replay_warning("AVX2", pin(env)) or "")
    assert "AVX512" in (replay_warning("AVX512", []) or "")
    assert replay_warning("AVX2", []) is None
