"""Subnet mode's runtime: the chain-backed seams a neuron runs with, built once from its config.

``build_runtime`` opens the wallet, the chain, this node's bucket; joins the subnet's membership
(commits how peers read our bucket); compiles the run plan from the subnet template with the
chain's roster; and hands the neuron a block clock, the chain membership and chain weights.
A misconfiguration surfaces here as one clear line: a missing wallet, an unreachable chain, an
unregistered hotkey, a bucket that does not answer, a plan that cannot run.
"""

from __future__ import annotations

from pathlib import Path

from ..chain import ChainClient, ChainSetupError, load_wallet
from ..clock import BlockClock
from ..config import BeamConfig
from ..membership.chain import ChainMembership, JoinSettings
from ..monitor import MetricsSink
from ..neuron.runtime import Runtime
from ..preflight import bucket_hint
from ..storage.base import StorageError
from ..storage.counting import ByteMeter, CountingStore, counting_factory
from ..storage.readers import ReaderPool, s3_reader
from ..storage.s3 import S3Store
from ..topology import PlanError, RunPlan
from ..weights.chain import ChainWeights
from .plan import subnet_plan

LOCAL_NETWORK_PREFIXES = ("sim://", "ws://127.", "ws://localhost")


def build_runtime(cfg: BeamConfig, role: str) -> Runtime:
    """Open the wallet, the chain, this node's bucket and the peers' readers; publish ours."""
    if cfg.node.room:  # room mode: the room's manifest, a time clock, no chain (subnet.room.node)
        from ..room.node import build_room_runtime

        return build_room_runtime(cfg, role)
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
    try:
        return _with_chain(cfg, role, wallet, chain)
    except BaseException:
        chain.close()  # a setup error ends the process: nothing may be left open (client.py)
        raise


def _with_chain(cfg: BeamConfig, role: str, wallet, chain: ChainClient) -> Runtime:
    """The rest of ``build_runtime`` once the chain answers."""
    node = cfg.node
    chain.require_registered(wallet.hotkey.ss58_address)
    meter = ByteMeter()  # every byte through our bucket and the peers' readers is counted
    store = CountingStore(S3Store.from_config(node.storage), meter)
    try:
        store.check()
        store.check_write_once()
    except StorageError as error:
        hint = bucket_hint(node.storage, error.reason)
        raise ChainSetupError(f"this node's bucket is not usable: {error}; {hint}") from None
    network = node.subtensor.network
    local = network.startswith(LOCAL_NETWORK_PREFIXES) or network == "local"
    readers = ReaderPool(factory=counting_factory(s3_reader, meter), allow_private_endpoints=local)
    join = JoinSettings(
        wallet, node.storage, guard=not local, overwrite=node.neuron.overwrite_commitment
    )
    membership = ChainMembership(chain, cfg.protocol.holder_hotkey, readers, join)
    membership.join()
    try:
        plan = subnet_plan(cfg.protocol, membership.refresh())
    except PlanError as error:
        raise ChainSetupError(
            f"the subnet's run plan cannot run on netuid {node.netuid}: {error}"
        ) from None
    state_dir = (
        Path(node.neuron.state_dir).expanduser() / f"{role}-{wallet.hotkey.ss58_address[:8]}"
    )
    metrics = MetricsSink(
        state_dir / "metrics.jsonl",
        mirrors=_mirrors(cfg, role, state_dir, plan),
        role=role,
        hotkey=wallet.hotkey.ss58_address,
        config_hash=cfg.protocol.config_hash(),
        plan=plan.digest,
    )
    return Runtime(
        cfg=cfg,
        role=role,
        signer=wallet.hotkey,
        store=store,
        membership=membership,
        clock=BlockClock(chain),
        plan=plan,
        metrics=metrics,
        state_dir=state_dir,
        weights=ChainWeights(chain, wallet),
        meter=meter,
    )


def _mirrors(cfg: BeamConfig, role: str, state_dir: Path, plan: RunPlan) -> list:
    """W&B when enabled; it logs the protocol config, its hash, the git commit and the plan."""
    w = cfg.node.wandb
    if w.mode == "disabled":
        return []
    from ..monitor.wandb_sink import WandbSink

    config = {
        "protocol": cfg.protocol.model_dump(mode="json"),
        "config_hash": cfg.protocol.config_hash(),
        "role": role,
        "netuid": cfg.node.netuid,
        "topology": plan.ref,
        "plan": plan.digest,
    }
    name = f"{role}-{cfg.node.wallet.name}-{cfg.node.wallet.hotkey}"
    folder = Path(w.dir).expanduser() if w.dir else state_dir
    return [
        WandbSink(
            mode=w.mode,
            project=w.project,
            name=name,
            group=cfg.protocol.run,
            folder=folder,
            config=config,
        )
    ]
