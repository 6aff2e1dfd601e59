"""Everyday mistakes: each one is one ``error:`` line with the fix, exit status 2, no traceback.

Every case runs the real entry point as a subprocess with a clean environment (no BEAM_* keys),
so what is asserted is exactly what an operator sees. All of them fail before any network call:
none of these commands has a chain or a storage server to talk to.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
HOLDER = "5EZuTYXEpRNmj2SXy84QgFQRyAgusTJaTVtVgb1ex42dqz3p"
MINER = ["neurons/miner.py", "--protocol.holder_hotkey", HOLDER, "--storage.bucket", "beam-m1"]
KEYS = {"BEAM_S3_ACCESS_KEY_ID": "k", "BEAM_S3_SECRET_ACCESS_KEY": "s"}
# On a CUDA build "cuda" may well work; a device index no machine has fails on every build.
NO_CUDA = "cuda" if torch.version.cuda is None else "cuda:99"


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "BT_"))}
    clean.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=clean, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def assert_one_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if "error:" in line]
    assert proc.returncode == 2, out
    assert len(errors) == 1, out
    assert "Traceback" not in out and "usage:" not in out, out
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


CASES = {
    "storage keys missing": (MINER, {}, ["BEAM_S3_ACCESS_KEY_ID", "BEAM_S3_SECRET_ACCESS_KEY",
                                         "_file", "docs/storage.md"]),
    "cuda without cuda": ([*MINER, "--neuron.device", NO_CUDA], KEYS, ["--neuron.device", "cpu"]),
    "unknown device": ([*MINER, "--neuron.device", "tpu0"], KEYS, ["not a torch device"]),
    "unknown preset": ([*MINER, "--protocol.model", "huge"], KEYS, ["tiny", "small"]),
    "config is a folder": ([*MINER, "--config", "docs"], KEYS, ["is a folder"]),
    "config missing": ([*MINER, "--config", "nope.toml"], KEYS, ["does not exist"]),
    "holder hotkey not ss58": (["neurons/validator.py", "--protocol.holder_hotkey", "holder",
                                "--storage.bucket", "beam-v1"], KEYS, ["not a valid ss58"]),
    "holder hotkey bad checksum": (["neurons/model_holder.py", "--protocol.holder_hotkey",
                                    HOLDER[:-1] + "q", "--storage.bucket", "beam-h"], KEYS,
                                   ["checksum"]),
    "no protocol file": (["neurons/miner.py", "--storage.bucket", "beam-m1"], KEYS,
                         ["holder_hotkey is empty", "--config protocol.toml"]),
    "no bucket": (["neurons/miner.py", "--protocol.holder_hotkey", HOLDER], KEYS,
                  ["--storage.bucket"]),
    "half a read pair": (MINER, {**KEYS, "BEAM_S3_READ_ACCESS_KEY_ID": "r"},
                         ["BEAM_S3_READ_SECRET_ACCESS_KEY"]),
    "misspelled flag": ([*MINER, "--wallet.nmae", "m1"], KEYS, ["did you mean --wallet.name"]),
    "abbreviated flag": ([*MINER, "--wallet.na", "m1"], KEYS, ["--wallet.na"]),
    "wrong network": ([*MINER, "--subtensor.network", "finny"], KEYS, ["sim://HOST:PORT"]),
    "bad number": ([*MINER, "--netuid", "three"], KEYS, ["--netuid"]),
    "misspelled file key": ([*MINER, "--config", "tests/config/fixtures/typo.toml"], KEYS,
                            ["did you mean 'wallet.name'"]),
    "report on no metrics": (["scripts/report.py", "docs"], {}, ["no metrics"]),
    "report misspelled flag": (["scripts/report.py", "docs", "--srve"], {}, ["did you mean --serve"]),
    "register misspelled flag": (["scripts/register.py", "--netuid", "3", "--wallet.hotky", "x"],
                                 {}, ["did you mean --wallet.hotkey"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_everyday_mistake_is_one_line(case):
    args, env, needles = CASES[case]
    assert_one_error(run(args, env), *needles)


def test_report_serve_on_a_busy_port(tmp_path):
    state = tmp_path / "state" / "miner-x"
    state.mkdir(parents=True)
    (state / "metrics.jsonl").write_text('{"event": "train", "window": 1, "t": 1}\n')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run(["scripts/report.py", str(tmp_path), "--serve", "--port", str(port)])
    assert_one_error(proc, f"port {port}", "--port")
    assert not (tmp_path / "report.html").exists()  # refused before writing anything
