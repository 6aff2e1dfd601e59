"""The local stack: simnet + a real S3 server + registered development wallets, in one call.

``LocalStack(root).start()`` brings up, on loopback ports:

1. simnet (a child process, state in ``root/simnet.db``) with netuid 3 created;
2. moto's standalone S3 server (a child process) with one bucket per participant;
3. unencrypted development wallets (owner, validators, miners, model holder) under
   ``root/wallets``, funded, registered through the real SDK, validators staked and permitted;
4. each participant's bucket read settings committed on chain (the Commitments pallet);
5. ``root/endpoints.json``, which neurons and scripts read to find all of the above.

``stop()`` (or leaving the ``with`` block, or Ctrl-C in ``scripts/localnet.py``) ends every
child process; they are also tied to this process's life (see ``processes.py``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from ..chain import ChainClient, build_subtensor
from ..chain.simnet import post
from ..chain.simnet.process import SimnetProcess
from ..storage.commitment import ReadSettings, encode_commitment
from ..storage.config import StorageConfig
from ..storage.local_server import MotoServer
from ..storage.s3 import S3Store
from .lock import StackLock
from .wallets import DevWallet, dev_wallet, roster

RAO = 1_000_000_000
LOCAL_HPARAMS: dict[str, Any] = {
    "tempo": 20,
    "weights_rate_limit": 5,
    "immunity_period": 10_000,
    "burn": RAO // 10,
}


@dataclass
class StackSettings:
    """Shape of the local stack."""

    netuid: int = 3
    n_validators: int = 2
    n_miners: int = 3
    block_time: float = 1.0
    validator_stake_tao: int = 1000
    hparams: dict[str, Any] = field(default_factory=lambda: dict(LOCAL_HPARAMS))


@dataclass
class Endpoints:
    """What ``root/endpoints.json`` tells neurons about the running stack."""

    network: str
    netuid: int
    wallet_path: str
    s3_endpoint: str
    wallets: list[DevWallet]

    def bucket(self, name: str) -> str:
        """The bucket of participant ``name``."""
        return f"beam-{name}"


class LocalStack:
    """Start and stop simnet, the S3 server and the development wallets under ``root``."""

    def __init__(self, root: str | Path, settings: StackSettings | None = None) -> None:
        self.root = Path(root).resolve()
        self.settings = settings or StackSettings()
        self.endpoints: Endpoints | None = None
        self._simnet: SimnetProcess | None = None
        self._s3: MotoServer | None = None
        self.lock = StackLock(self.root)

    @property
    def simnet_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the simnet process."""
        assert self.endpoints is not None, "stack not started"
        return "http://" + self.endpoints.network.removeprefix("sim://")

    def start(self) -> Endpoints:
        """Bring everything up; returns the endpoints (also written to ``endpoints.json``).

        Raises StackRunning, touching nothing, when a live stack already runs in ``root``.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        try:
            network = self._start_simnet()
            self._s3 = MotoServer(log_path=self.root / "logs" / "s3.log")
            s3_endpoint = self._s3.start()
            wallets = self._provision(network, s3_endpoint)
        except BaseException:
            self.stop()
            raise
        self.endpoints = Endpoints(
            network, self.settings.netuid, str(self.root / "wallets"), s3_endpoint, wallets
        )
        (self.root / "endpoints.json").write_text(json.dumps(asdict(self.endpoints), indent=2))
        self.lock.update(network=network, s3_endpoint=s3_endpoint)
        return self.endpoints

    def stop(self) -> None:
        """Stop the S3 server and simnet (idempotent)."""
        if self._s3 is not None:
            self._s3.stop()
            self._s3 = None
        if self._simnet is not None:
            self._simnet.stop()
            self._simnet = None
        self.lock.release()

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # Steps ---------------------------------------------------------------------------------

    def _start_simnet(self) -> str:
        # 120 s: importing the SDK alone took 54 s at load average 50 (30 s is the default).
        self._simnet = SimnetProcess(
            self.root / "simnet.db",
            self.root / "logs" / "simnet.log",
            block_time=self.settings.block_time,
        ).start(timeout=120.0)
        return self._simnet.network

    def _provision(self, network: str, s3_endpoint: str) -> list[DevWallet]:
        s = self.settings
        url = "http://" + network.removeprefix("sim://")
        path = self.root / "wallets"
        wallets = {name: dev_wallet(path, name) for name, _ in roster(s.n_validators, s.n_miners)}
        owner = wallets["owner"]
        post(
            url,
            "admin_create_subnet",
            {
                "netuid": s.netuid,
                "owner_coldkey": owner.coldkeypub.ss58_address,
                "owner_hotkey": owner.hotkey.ss58_address,
                "hparams": s.hparams,
            },
        )
        chain = ChainClient(build_subtensor(network), s.netuid)
        out = []
        for name, role in roster(s.n_validators, s.n_miners):
            wallet = wallets[name]
            post(url, "admin_fund", {"coldkey": wallet.coldkeypub.ss58_address, "rao": 10**4 * RAO})
            if role != "owner":
                uid = chain.register(wallet)
                self._publish_bucket(chain, wallet, name, s3_endpoint)
                logger.info("registered {} ({}) as uid {}", name, role, uid)
            if role == "validator":
                chain.add_stake(wallet, s.validator_stake_tao * RAO)
            out.append(
                DevWallet(name, role, wallet.coldkeypub.ss58_address, wallet.hotkey.ss58_address)
            )
        post(url, "admin_refresh_permits", {"netuid": s.netuid})
        return out

    def _publish_bucket(self, chain: ChainClient, wallet, name: str, s3_endpoint: str) -> None:
        assert self._s3 is not None
        bucket = f"beam-{name}"
        config = StorageConfig(bucket=bucket, endpoint_url=s3_endpoint, addressing_style="path")
        S3Store.from_config(config, environ=self._s3.environ()).ensure_bucket()
        env = self._s3.environ()
        settings = ReadSettings(
            bucket=bucket,
            endpoint_url=s3_endpoint,
            access_key_id=env["BEAM_S3_ACCESS_KEY_ID"],
            secret_access_key=env["BEAM_S3_SECRET_ACCESS_KEY"],
        )
        chain.commit(wallet, encode_commitment(settings))


def read_endpoints(root: str | Path) -> dict[str, Any]:
    """The ``endpoints.json`` a running local stack wrote under ``root``."""
    path = Path(root) / "endpoints.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; start the stack with `python scripts/localnet.py`"
        )
    return json.loads(path.read_text())
