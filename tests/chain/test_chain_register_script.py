"""Registering a wallet of your own on simnet with the repo's own script (btcli cannot reach it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import bittensor as bt

ROOT = Path(__file__).resolve().parents[2]


def register(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "register.py"), *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_own_wallet_registers_with_fund_on_simnet(simnet, subnet3, tmp_path):
    wallet = bt.Wallet("mine", "default", path=str(tmp_path))
    wallet.create_new_coldkey(use_password=False, suppress=True)
    wallet.create_new_hotkey(use_password=False, suppress=True)
    base = ["--subtensor.network", simnet.network, "--netuid", "3", "--wallet.name", "mine",
            "--wallet.path", str(tmp_path)]  # fmt: skip
    broke = register(*base)  # an unfunded coldkey cannot pay the burn
    assert broke.returncode == 2 and "Traceback" not in broke.stderr, broke.stderr
    assert "--fund" in broke.stderr
    proc = register(*base, "--fund", "100")
    assert proc.returncode == 0, proc.stderr
    assert wallet.hotkey.ss58_address in proc.stdout
    assert subnet3.uid_of(wallet.hotkey.ss58_address) is not None


def test_fund_is_refused_off_simnet(tmp_path):
    proc = register("--subtensor.network", "finney", "--fund", "1", "--wallet.path", str(tmp_path))
    assert proc.returncode == 2 and "simnet" in proc.stderr and "Traceback" not in proc.stderr
