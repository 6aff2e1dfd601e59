"""A miner on two ranks (gloo, CPU): the same upload as one rank, and a dead rank stops the other.

Each test starts ``tests/training/dist_worker.py`` twice with the environment torchrun would set
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so `launch` and `Group.serve` run for real.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from subnet.compression import CompressionConfig, build_compressor
from subnet.compression.agreement import agreement
from subnet.config import ConfigError
from subnet.kernels import PINNED
from subnet.training.distributed import launch
from subnet.training.parallel import ParallelConfig
from subnet.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from dist_worker import train_windows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("dist_worker.py")
#: A kernel path other than this process's best: ATen's generic kernels, MKL without AVX-512.
OTHER_PATH = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
ERROR_FEEDBACK = CompressionConfig().ef_decay


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(
    tmp_path: Path, *args: str, world: int = 2, env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world)}  # fmt: skip
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "--out", str(tmp_path / "out.pt"), *args],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for r in range(world)
    ]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


@pytest.fixture(scope="module")
def one_rank() -> dict:
    torch.set_num_threads(1)
    return train_windows(Trainer())


def _norm(tensors: dict[str, torch.Tensor]) -> float:
    return sum(float(t.double().pow(2).sum()) for t in tensors.values()) ** 0.5


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_rank_upload_matches_one_rank(tmp_path: Path, one_rank: dict, mode: str) -> None:
    # The ranks run on another kernel path than this process (the reference): generic ATen
    # kernels, MKL limited to AVX2, two threads. Tolerances: docs/benchmarks.md, "Numerics
    # across kernel paths" (`scripts/bench.py numerics`).
    ranks = _run_ranks(tmp_path, "--mode", mode, "--threads", "2", env=OTHER_PATH)
    assert [r.returncode for r in ranks] == [0, 0], (
        ranks[0].stderr[-2000:] + ranks[1].stderr[-2000:]
    )
    two = torch.load(tmp_path / "out.pt")
    codec = build_compressor(CompressionConfig())
    residual: dict[str, torch.Tensor] = {}  # the two-rank miner's error feedback
    for w in range(2):  # the second window also checks that AdamW state carried over
        d1, d2 = one_rank[f"delta{w}"], two[f"delta{w}"]
        # Only the order of floating-point sums differs: measured <= 4.1e-5 over the paths.
        assert _norm({k: d1[k] - d2[k] for k in d1}) / _norm(d1) < 1e-4
        assert two[f"tokens{w}"] == one_rank[f"tokens{w}"]
        assert abs(two[f"loss{w}"] - one_rank[f"loss{w}"]) < 1e-5  # measured <= 6.4e-7
        # The upload is compared in the codec's input domain: the one-rank pseudo-gradient
        # plus the two-rank miner's own error feedback (its residual is its own state: the
        # payloads may differ at near-ties, and so may what they leave behind). Inputs within
        # 1e-4 (L2, as the pseudo-gradients); the distance the payloads force: <= 7.3e-8.
        reference = {k: residual[k].mul(ERROR_FEEDBACK) + d1[k] if residual else d1[k] for k in d1}
        got = agreement(codec, two[f"payload{w}"], reference, rtol=1e-4)
        assert got.ok, got
        shapes = {k: tuple(t.shape) for k, t in d2.items()}
        decoded = codec.decode(two[f"payload{w}"], shapes)
        residual = {k: two[f"input{w}"][k] - decoded[k] for k in d2}


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_a_replay_on_the_miners_ranks_is_its_training_bit_for_bit(
    tmp_path: Path, mode: str
) -> None:
    # The ranks on the kernels every neuron pins, MKL held to AVX2 (another CPU); the replays
    # (a validator's, one process) with MKL free. Two micro-batches a step, clipping and the warm
    # start's floor: DDP's and FSDP2's average of 2 ranks are both reproduced exactly (FSDP2's
    # norms and floor are taken over whole tensors, subnet.training.inner).
    ranks = _run_ranks(tmp_path, "--mode", mode, env={**PINNED, "MKL_ENABLE_INSTRUCTIONS": "AVX2"})
    assert [r.returncode for r in ranks] == [0, 0], ranks[0].stderr[-2000:]
    miner = torch.load(tmp_path / "out.pt")["delta0"]
    replays = {}
    for count in (2, 1):
        out = tmp_path / f"replay{count}.pt"
        env = {**os.environ, **PINNED, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, str(WORKER), "--out", str(out), "--replay-ranks", str(count)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        replays[count] = torch.load(out)["delta0"]
    assert all(torch.equal(replays[2][k], v) for k, v in miner.items())
    assert not all(torch.equal(replays[1][k], v) for k, v in miner.items())  # one rank is not


@pytest.mark.parametrize(("dead", "survivor"), [(1, 0), (0, 1)])
def test_a_dead_rank_stops_the_other_with_one_line(
    tmp_path: Path, dead: int, survivor: int
) -> None:
    ranks = _run_ranks(tmp_path, "--die", str(dead), "--timeout", "600")
    assert ranks[dead].returncode == 3
    assert ranks[survivor].returncode == 1
    ours = [line for line in ranks[survivor].stderr.splitlines() if "stopped answering" in line]
    assert len(ours) == 1, ranks[survivor].stderr
    # The survivor heard of the death from the closed connection, not from the (here 10-minute)
    # timeout, which would also outlast _run_ranks's wait.
    assert "closed by peer" in ours[0] or "reset by peer" in ours[0], ours[0]
    assert "Traceback" not in ranks[survivor].stderr


def test_micro_batch_that_does_not_split_over_the_ranks_is_a_config_error(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(ConfigError, match="cannot be split over 3 ranks"):
        with launch(ParallelConfig(), "cpu", micro_batch=8):
            pass


def test_without_torchrun_there_is_no_group(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with launch(ParallelConfig(), "cpu", micro_batch=8) as group:
        assert group is None
        assert Trainer().group is None
