"""Bad input at the command line: one clear line, exit code 2, no traceback, no hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import bittensor as bt
import pytest

from subnet.storage.local_server import free_port

ROOT = Path(__file__).resolve().parents[2]
RAO = 1_000_000_000


def run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})}, cwd=ROOT,
    )  # fmt: skip


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr  # teardown noise after the line
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_wrong_network_string():
    proc = run("metagraph.py", "--subtensor.network", "finnney")
    assert_one_line_error(proc, "--subtensor.network", "unknown network 'finnney'")


def test_unreachable_chain():
    proc = run("metagraph.py", "--subtensor.network", f"sim://127.0.0.1:{free_port()}")
    assert_one_line_error(proc, "cannot reach chain", "scripts/localnet.py")


def test_missing_wallet(tmp_path):
    proc = run("register.py", "--wallet.name", "ghost", "--wallet.path", str(tmp_path))
    assert_one_line_error(proc, "no hotkey 'default' in wallet 'ghost'", "--wallet.path")


def test_a_misspelled_wallet_or_hotkey_lists_what_is_there(tmp_path):
    for name in ("m1", "v1"):
        (tmp_path / name / "hotkeys").mkdir(parents=True)
        (tmp_path / name / "hotkeys" / "default").write_text("{}")
        (tmp_path / name / "hotkeys" / "defaultpub.txt").write_text("{}")
    proc = run("register.py", "--wallet.name", "m2", "--wallet.path", str(tmp_path))
    assert_one_line_error(proc, "no hotkey 'default' in wallet 'm2'", "wallets there: m1, v1")
    args = ("--wallet.name", "m1", "--wallet.hotkey", "hot", "--wallet.path", str(tmp_path))
    proc = run("register.py", *args)
    assert_one_line_error(proc, "no hotkey 'hot' in wallet 'm1'", "its hotkeys: default")


def test_netuid_that_does_not_exist(simnet, subnet3):
    proc = run("metagraph.py", "--subtensor.network", simnet.network, "--netuid", "99")
    assert_one_line_error(proc, "netuid 99 does not exist", "--netuid")


@pytest.fixture
def locked_wallet(tmp_path, simnet, subnet3):
    wallet = bt.Wallet("locked", "default", path=str(tmp_path))
    wallet.create_new_coldkey(use_password=True, coldkey_password="s3cret-pw", suppress=True)
    wallet.create_new_hotkey(use_password=False, suppress=True)
    simnet.admin("admin_fund", coldkey=wallet.coldkeypub.ss58_address, rao=10 * RAO)
    return wallet


def test_locked_coldkey_without_password_fails_fast(locked_wallet, simnet, tmp_path):
    env = {"BT_WALLET_PASSWORD": "", "BT_WALLET_PASSWORD_FILE": ""}
    args = ["--wallet.name", "locked", "--wallet.path", str(tmp_path),
            "--subtensor.network", simnet.network]  # fmt: skip
    proc = run("register.py", *args, env=env)
    assert_one_line_error(proc, "is encrypted", "BT_WALLET_PASSWORD")


def test_locked_coldkey_unlocks_from_password_file(locked_wallet, simnet, tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("s3cret-pw\n")
    args = ["--wallet.name", "locked", "--wallet.path", str(tmp_path),
            "--subtensor.network", simnet.network]  # fmt: skip
    proc = run("register.py", *args, env={"BT_WALLET_PASSWORD_FILE": str(secret)})
    assert proc.returncode == 0, proc.stderr
    assert locked_wallet.hotkey.ss58_address in proc.stdout
    assert "s3cret-pw" not in proc.stdout + proc.stderr


def test_wrong_password_is_a_clear_error(locked_wallet, simnet, tmp_path):
    args = ["--wallet.name", "locked", "--wallet.path", str(tmp_path),
            "--subtensor.network", simnet.network]  # fmt: skip
    proc = run("register.py", *args, env={"BT_WALLET_PASSWORD": "wrong"})
    assert_one_line_error(proc, "cannot unlock the coldkey")


@pytest.mark.parametrize("script", ["miner.py", "validator.py"])
def test_unregistered_neuron_exits_with_one_line(simnet, subnet3, tmp_path, script):
    """One ``error:`` line and nothing else (a validator once added 25 lines of event-loop
    teardown noise after it)."""
    from subnet.localnet.wallets import dev_wallet

    dev_wallet(tmp_path, "stranger")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "neurons" / script), "--subtensor.network", simnet.network,
         "--wallet.name", "stranger", "--wallet.path", str(tmp_path), "--storage.bucket", "nobody",
         "--protocol.holder_hotkey", "5EZuTYXEpRNmj2SXy84QgFQRyAgusTJaTVtVgb1ex42dqz3p"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "BEAM_S3_ACCESS_KEY_ID": "k", "BEAM_S3_SECRET_ACCESS_KEY": "s"},
    )  # fmt: skip
    # simnet: the hint is the repo's own script (btcli cannot reach simnet)
    assert_one_line_error(proc, "is not registered on netuid 3", "scripts/register.py")


def test_neuron_without_a_bucket_says_how_to_configure_one(simnet, subnet3):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "neurons" / "validator.py"), "--subtensor.network", simnet.network,
         "--protocol.holder_hotkey", "5EZuTYXEpRNmj2SXy84QgFQRyAgusTJaTVtVgb1ex42dqz3p"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    assert_one_line_error(proc, "--storage.bucket")
