"""A miner on two ranks (gloo, CPU): the same upload as one rank, and a dead rank stops the other.

Each test starts ``tests/training/dist_worker.py`` twice with the environment torchrun would set
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so `launch` and `Group.serve` run for real.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from subnet.config import ConfigError
from subnet.training.distributed import launch
from subnet.training.parallel import ParallelConfig
from subnet.training.trainer import Trainer

sys.path.insert(0, str(Path(__file__).parent))
from dist_worker import train_windows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("dist_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(tmp_path: Path, *args: str, world: int = 2) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1",
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


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_rank_upload_matches_one_rank(tmp_path: Path, one_rank: dict, mode: str) -> None:
    ranks = _run_ranks(tmp_path, "--mode", mode)
    assert [r.returncode for r in ranks] == [0, 0], (
        ranks[0].stderr[-2000:] + ranks[1].stderr[-2000:]
    )
    two = torch.load(tmp_path / "out.pt")
    for w in range(2):  # the second window also checks that AdamW state carried over
        d1, d2 = one_rank[f"delta{w}"], two[f"delta{w}"]
        diff = sum(((d1[k] - d2[k]) ** 2).sum() for k in d1) ** 0.5
        norm = sum((d1[k] ** 2).sum() for k in d1) ** 0.5
        # Only the order of floating-point sums differs (measured ~6e-6 relative).
        assert diff / norm < 1e-4
        assert two[f"tokens{w}"] == one_rank[f"tokens{w}"]
        assert abs(two[f"loss{w}"] - one_rank[f"loss{w}"]) < 1e-5
        p1, p2 = one_rank[f"payload{w}"], two[f"payload{w}"]
        assert p1.keys() == p2.keys()
        for key in p1:
            if key == "cb" or key.endswith("::cb"):  # SparseLoCo's codebooks: fp32 values
                assert torch.allclose(p1[key], p2[key], rtol=1e-5, atol=1e-9), key
            else:  # which coordinates are sent, and their 2-bit codes: identical
                assert torch.equal(p1[key], p2[key]), key


@pytest.mark.parametrize(("dead", "survivor"), [(1, 0), (0, 1)])
def test_a_dead_rank_stops_the_other_with_one_line(
    tmp_path: Path, dead: int, survivor: int
) -> None:
    started = time.monotonic()
    ranks = _run_ranks(tmp_path, "--die", str(dead), "--timeout", "60")
    assert time.monotonic() - started < 120  # the gloo error arrives at once, not at the timeout
    assert ranks[dead].returncode == 3
    assert ranks[survivor].returncode == 1
    ours = [line for line in ranks[survivor].stderr.splitlines() if "stopped answering" in line]
    assert len(ours) == 1, ranks[survivor].stderr
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
