"""Development wallets for the local stack: unencrypted and derived from their names.

Keys come from ``sha256("beam-dev/<name>/<cold|hot>")`` so every local run has the same
addresses (handy in docs and logs). They are for simnet and the Docker localnet only: anyone can
derive them, so never fund one on a real network.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import bittensor as bt


def _seed(name: str, kind: str) -> str:
    return hashlib.sha256(f"beam-dev/{name}/{kind}".encode()).hexdigest()


@dataclass(frozen=True)
class DevWallet:
    """A development wallet's name and addresses."""

    name: str
    role: str  # owner | validator | miner | holder
    coldkey: str
    hotkey: str


def dev_wallet(path: str | Path, name: str) -> bt.Wallet:
    """Create (idempotently) the unencrypted development wallet ``name`` under ``path``."""
    wallet = bt.Wallet(name, "default", path=str(path))
    if not wallet.coldkey_file.exists_on_device():
        wallet.regenerate_coldkey(
            seed=_seed(name, "cold"), use_password=False, overwrite=True, suppress=True
        )
    if not wallet.hotkey_file.exists_on_device():
        wallet.regenerate_hotkey(
            seed=_seed(name, "hot"), use_password=False, overwrite=True, suppress=True
        )
    return wallet


def roster(n_validators: int, n_miners: int) -> list[tuple[str, str]]:
    """``(wallet name, role)`` for the owner, validators, miners and the model holder."""
    return (
        [("owner", "owner")]
        + [(f"validator{i}", "validator") for i in range(1, n_validators + 1)]
        + [(f"miner{i}", "miner") for i in range(1, n_miners + 1)]
        + [("holder", "holder")]
    )
