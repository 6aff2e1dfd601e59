"""The local stack: simnet + S3 server + registered wallets, and nothing left behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from subnet.chain import ChainClient, build_subtensor
from subnet.localnet import LocalStack, StackSettings
from subnet.storage.commitment import decode_commitment
from subnet.storage.config import StorageConfig
from subnet.storage.s3 import S3Store

ROOT = Path(__file__).resolve().parents[2]


def listening(url: str) -> bool:
    host, port = url.split("//")[1].split(":")
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def test_stack_registers_stakes_commits_and_stops(tmp_path):
    settings = StackSettings(n_validators=2, n_miners=2, block_time=0.2)
    with LocalStack(tmp_path, settings) as stack:
        ep = stack.endpoints
        graph = ChainClient(build_subtensor(ep.network), 3).metagraph()
        names = {w.hotkey: w.name for w in ep.wallets}
        assert [names[h] for h in graph.hotkeys] == [
            "validator1", "validator2", "miner1", "miner2", "holder",
        ]  # fmt: skip
        assert [n.validator_permit for n in graph.neurons] == [True, True, False, False, False]
        for neuron in graph.neurons:
            settings_ = decode_commitment(neuron.commitment.value)
            assert settings_.bucket == f"beam-{names[neuron.hotkey]}"
            store = S3Store.from_config(
                StorageConfig(bucket=settings_.bucket, endpoint_url=settings_.endpoint_url,
                              addressing_style="path"),
                environ={"BEAM_S3_ACCESS_KEY_ID": settings_.access_key_id,
                         "BEAM_S3_SECRET_ACCESS_KEY": settings_.secret_access_key},
            )  # fmt: skip
            store.check()  # the committed read settings reach a real bucket
        written = json.loads((tmp_path / "endpoints.json").read_text())
        assert written["network"] == ep.network and written["netuid"] == 3
        simnet_url = "http://" + ep.network.removeprefix("sim://")
        assert listening(simnet_url) and listening(ep.s3_endpoint)
    assert not listening(simnet_url) and not listening(ep.s3_endpoint)


def test_localnet_script_stops_everything_on_ctrl_c(tmp_path):
    root = tmp_path / "stack"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "localnet.py"), "--root", str(root),
         "--miners", "1", "--validators", "1", "--block-time", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (root / "endpoints.json").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    endpoints = json.loads((root / "endpoints.json").read_text())
    simnet_url = "http://" + endpoints["network"].removeprefix("sim://")
    assert listening(simnet_url) and listening(endpoints["s3_endpoint"])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "validator1" in out and "local stack stopped" in out
    assert not listening(simnet_url) and not listening(endpoints["s3_endpoint"])
