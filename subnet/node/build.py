"""Subnet mode's runtime: the chain-backed seams a neuron runs with, built once from its config.

``build_runtime`` opens the wallet, the chain, this node's bucket; joins the subnet's membership
(commits how peers read our bucket); compiles the run plan from the subnet template with the
chain's roster; and hands the one runtime builder both modes share (``subnet.neuron.seams``)
these seams: a block clock (the chain's drand pulses the beacon), the chain membership, chain weights.
A misconfiguration surfaces here as one clear line: a missing wallet or bucket, an unreachable
chain, an unregistered hotkey, a bucket that does not answer, a plan that cannot run.
"""

from __future__ import annotations

from ..chain import ChainClient, ChainSetupError, load_wallet
from ..clock import BlockClock
from ..config import HOLDER_HOTKEY_EMPTY, BeamConfig
from ..membership.chain import ChainMembership, JoinSettings
from ..neuron.runtime import Runtime
from ..neuron.seams import Seams, make_runtime, open_bucket
from ..storage.config import require_bucket
from ..storage.counting import ByteMeter, counting_factory
from ..storage.readers import ReaderPool, s3_reader
from ..topology import PlanError
from ..weights.chain import ChainWeights
from .plan import subnet_plan

LOCAL_NETWORK_PREFIXES = ("sim://", "ws://127.", "ws://localhost")
NOMINAL_BLOCK_S = 12.0  # a block's nominal time, until the miner's pacer has measured a few


def build_runtime(cfg: BeamConfig, role: str) -> Runtime:
    """Open the wallet, the chain, this node's bucket and the peers' readers; publish ours."""
    if cfg.node.room:  # room mode: the room's manifest, a time clock, no chain (subnet.room.node)
        from ..room.node import build_room_runtime

        return build_room_runtime(cfg, role)
    require_bucket(cfg.node.storage)  # said before anything is opened, as a room says it
    if not cfg.protocol.holder_hotkey:
        raise ChainSetupError(HOLDER_HOTKEY_EMPTY)
    wallet = load_wallet(cfg.node.wallet)
    chain = ChainClient.open(cfg.node.subtensor.network, cfg.node.netuid)
    try:
        return _with_chain(cfg, role, wallet, chain)
    except BaseException:
        chain.close()  # a setup error ends the process: nothing may be left open (client.py)
        raise


def _with_chain(cfg: BeamConfig, role: str, wallet, chain: ChainClient) -> Runtime:
    """The rest of ``build_runtime`` once the chain answers: the subnet's seams."""
    node = cfg.node
    chain.require_registered(wallet.hotkey.ss58_address)
    meter = ByteMeter()  # every byte through our bucket and the peers' readers is counted
    store = open_bucket(node.storage, meter)
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
    clock = BlockClock(chain)
    seams = Seams(
        clock=clock,
        membership=membership,
        weights=ChainWeights(chain, wallet),
        plan=plan,
        beacon=clock.beacon,  # a drand pulse: the draw of the checks of training
        tick_seconds=NOMINAL_BLOCK_S,  # blocks are time: measured, nominally 12 s
        labels={"netuid": node.netuid},
    )
    return make_runtime(cfg, role, wallet.hotkey, store, seams)
