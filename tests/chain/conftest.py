"""Fixtures for chain tests: a real simnet server process with manual blocks, and dev wallets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import bittensor as bt
import pytest

from subnet.chain import ChainClient, build_subtensor
from subnet.chain.simnet.process import SimnetProcess
from subnet.localnet.wallets import dev_wallet

NETUID = 3
RAO = 1_000_000_000


@pytest.fixture(scope="module")
def simnet(tmp_path_factory) -> Iterator[SimnetProcess]:
    """A fresh simnet process (block time 0: tests step blocks themselves)."""
    root = tmp_path_factory.mktemp("simnet")
    sim = SimnetProcess(root / "chain.db", root / "simnet.log", block_time=0).start()
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def wallet_dir(tmp_path_factory) -> Path:
    """A folder of development wallets."""
    return tmp_path_factory.mktemp("wallets")


@pytest.fixture(scope="module")
def wallets(wallet_dir) -> dict[str, bt.Wallet]:
    """owner, two validators and two miners."""
    names = ["owner", "validator1", "validator2", "miner1", "miner2"]
    return {name: dev_wallet(wallet_dir, name) for name in names}


@pytest.fixture(scope="module")
def subnet3(simnet, wallets) -> ChainClient:
    """netuid 3 with funded wallets; nobody registered yet."""
    owner = wallets["owner"]
    simnet.admin(
        "admin_create_subnet",
        netuid=NETUID,
        owner_coldkey=owner.coldkeypub.ss58_address,
        owner_hotkey=owner.hotkey.ss58_address,
        hparams={"tempo": 10, "weights_rate_limit": 5, "burn": RAO},
    )
    for wallet in wallets.values():
        simnet.admin("admin_fund", coldkey=wallet.coldkeypub.ss58_address, rao=100 * RAO)
    return ChainClient(build_subtensor(simnet.network), NETUID)
