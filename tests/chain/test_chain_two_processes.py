"""Two OS processes share one simnet: each sees what the other wrote."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RAO = 1_000_000_000

PEER = Path(__file__).with_name("chain_peer.py")


def test_two_processes_share_one_chain(tmp_path, simnet, subnet3, wallet_dir):
    from subnet.localnet.wallets import dev_wallet

    names = ["peer-a", "peer-b"]
    for name in names:
        wallet = dev_wallet(wallet_dir, name)
        simnet.admin("admin_fund", coldkey=wallet.coldkeypub.ss58_address, rao=10 * RAO)
    procs = [
        subprocess.Popen(
            [sys.executable, str(PEER), simnet.network, str(wallet_dir), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in names
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    uids = {int(out.split()[0]) for out, _ in outputs}
    assert len(uids) == 2  # distinct uids, assigned by the one chain
    seen = subnet3.commitments()
    for name in names:
        assert seen[dev_wallet(wallet_dir, name).hotkey.ss58_address] == f"hello from {name}"
