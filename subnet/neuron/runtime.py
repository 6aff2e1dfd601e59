"""Everything a neuron talks to, built once from its config: wallet, chain, storage, data.

``build_runtime`` is where a misconfiguration surfaces, with one clear line: a missing wallet,
an unreachable chain, an unregistered hotkey, a bucket that does not answer.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import bittensor as bt
from loguru import logger

from ..chain import ChainClient, ChainSetupError, load_wallet
from ..clock import WindowClock
from ..config import BeamConfig
from ..data import TokenDataset
from ..monitor import MetricsSink
from ..preflight import bucket_hint
from ..storage.base import ObjectNotFound, ObjectStore, StorageError
from ..storage.commitment import CommitmentError, ReadSettings, decode_commitment, encode_commitment
from ..storage.keys import dataset_prefix
from ..storage.readers import ReaderPool
from ..storage.s3 import S3Store

READ_KEY_ENV = "BEAM_S3_READ_ACCESS_KEY_ID"
READ_SECRET_ENV = "BEAM_S3_READ_SECRET_ACCESS_KEY"
LOCAL_NETWORK_PREFIXES = ("sim://", "ws://127.", "ws://localhost")


@dataclass
class Runtime:
    """A neuron's handles on the outside world."""

    cfg: BeamConfig
    role: str
    wallet: bt.Wallet
    chain: ChainClient
    store: ObjectStore
    readers: ReaderPool
    metrics: MetricsSink
    state_dir: Path
    clock: WindowClock = field(init=False)

    def __post_init__(self) -> None:
        self.clock = WindowClock(self.cfg.protocol.window)

    @property
    def hotkey(self) -> str:
        """This neuron's ss58 hotkey."""
        return self.wallet.hotkey.ss58_address

    @property
    def max_bytes(self) -> int:
        """The largest object this neuron downloads."""
        return int(self.cfg.protocol.max_upload_mb * 1024 * 1024)

    def refresh_readers(self) -> bt.Metagraph:
        """Re-read the metagraph and rebuild readers for changed commitments."""
        graph = self.chain.metagraph()
        self.readers.update(
            {n.hotkey: n.commitment.value for n in graph.neurons if n.commitment is not None}
        )
        return graph

    def dataset(self, wait_s: float = 600.0) -> TokenDataset:
        """The protocol's dataset, read from the model holder's bucket.

        Waits (up to ``wait_s``, logging why) while the holder has not committed its bucket or
        published the dataset yet: neurons may start in any order.
        """
        holder, name = self.cfg.protocol.holder_hotkey, self.cfg.protocol.dataset
        deadline = time.monotonic() + wait_s
        while True:
            store = self.store if holder == self.hotkey else self.readers.get(holder)
            if store is not None:
                source = StoreSource(store, dataset_prefix(name), self.max_bytes)
                try:
                    return TokenDataset(source, self.cfg.protocol.seq_len)
                except ObjectNotFound:
                    why = f"dataset {name} is not in the model holder's bucket yet"
            else:
                why = f"the model holder {holder[:8]} has no readable bucket on chain yet"
            if time.monotonic() > deadline:
                raise ChainSetupError(f"{why}; check --protocol.holder_hotkey and the holder")
            logger.info("waiting: {}", why)
            time.sleep(5)
            self.refresh_readers()


class StoreSource:
    """A read-only view of one prefix of an ObjectStore, as the data module's ``Source``."""

    def __init__(self, store: ObjectStore, prefix: str, max_bytes: int) -> None:
        self.store, self.prefix, self.max_bytes = store, prefix, max_bytes

    def get(self, key: str) -> bytes:
        """The bytes of ``prefix + key`` (bounded by ``max_bytes``)."""
        return self.store.get(self.prefix + key, self.max_bytes)


def build_runtime(cfg: BeamConfig, role: str) -> Runtime:
    """Open the wallet, the chain, this node's bucket and the peers' readers; publish ours."""
    node = cfg.node
    if node.storage is None:
        raise ChainSetupError(
            "no bucket configured; set --storage.bucket (and --storage.endpoint_url for R2 or "
            "a local server); see docs/storage.md"
        )
    if not cfg.protocol.holder_hotkey:
        raise ChainSetupError("--protocol.holder_hotkey is empty; the subnet's docs name it")
    wallet = load_wallet(node.wallet)
    chain = ChainClient.open(node.subtensor.network, node.netuid)
    chain.require_registered(wallet.hotkey.ss58_address)
    store = S3Store.from_config(node.storage)
    try:
        store.check()
    except StorageError as error:
        hint = bucket_hint(node.storage, error.reason)
        raise ChainSetupError(f"this node's bucket is not usable: {error}; {hint}") from None
    local = (
        node.subtensor.network.startswith(LOCAL_NETWORK_PREFIXES)
        or node.subtensor.network == "local"
    )
    state_dir = (
        Path(node.neuron.state_dir).expanduser() / f"{role}-{wallet.hotkey.ss58_address[:8]}"
    )
    rt = Runtime(
        cfg=cfg,
        role=role,
        wallet=wallet,
        chain=chain,
        store=store,
        readers=ReaderPool(allow_private_endpoints=local),
        metrics=MetricsSink(state_dir / "metrics.jsonl", mirrors=_mirrors(cfg, role, state_dir),
                            role=role, hotkey=wallet.hotkey.ss58_address,
                            config_hash=cfg.protocol.config_hash()),
        state_dir=state_dir,
    )  # fmt: skip
    publish_read_settings(rt)
    rt.refresh_readers()
    return rt


def _mirrors(cfg: BeamConfig, role: str, state_dir: Path) -> list:
    """W&B when enabled; it logs the protocol config, its hash, the git commit and topology."""
    w = cfg.node.wandb
    if w.mode == "disabled":
        return []
    from ..monitor.wandb_sink import WandbSink

    config = {"protocol": cfg.protocol.model_dump(mode="json"),
              "config_hash": cfg.protocol.config_hash(), "role": role, "netuid": cfg.node.netuid}  # fmt: skip
    name = f"{role}-{cfg.node.wallet.name}-{cfg.node.wallet.hotkey}"
    folder = Path(w.dir).expanduser() if w.dir else state_dir
    return [WandbSink(mode=w.mode, project=w.project, name=name, group=cfg.protocol.run,
                      folder=folder, config=config)]  # fmt: skip


def publish_read_settings(rt: Runtime) -> None:
    """Commit how peers read our bucket, unless the chain already holds the same settings."""
    storage = rt.cfg.node.storage
    assert storage is not None
    key, secret = os.environ.get(READ_KEY_ENV), os.environ.get(READ_SECRET_ENV)
    if bool(key) != bool(secret):
        raise ChainSetupError(f"set both {READ_KEY_ENV} and {READ_SECRET_ENV}, or neither")
    wanted = ReadSettings(
        bucket=storage.bucket, endpoint_url=storage.endpoint_url, region=storage.region,
        prefix=storage.prefix, access_key_id=key or None, secret_access_key=secret or None,
    )  # fmt: skip
    current = rt.chain.commitments().get(rt.hotkey)
    try:
        if current is not None and _same_location(decode_commitment(current), wanted, key):
            return
    except CommitmentError:
        pass  # an unparseable old commitment is replaced below
    if key is None:
        logger.warning("no {} set: committing anonymous (public-read) access", READ_KEY_ENV)
    rt.chain.commit(rt.wallet, encode_commitment(wanted))
    logger.info("committed read settings for bucket {}", storage.bucket)


def _same_location(old: ReadSettings, new: ReadSettings, key: str | None) -> bool:
    same = (old.bucket, old.endpoint_url, old.region, old.prefix) == (
        new.bucket, new.endpoint_url, new.region, new.prefix,
    )  # fmt: skip
    # Without a read key configured here, keep whatever key was committed before.
    return same and (key is None or old.access_key_id == key)
