"""Room mode's runtime: what ``neurons/*.py --room ADDRESS --run NAME`` runs with.

The same roles and the same compiled topology as subnet mode, with other seams: membership from
the room's signed manifest (:class:`~subnet.room.membership.RoomMembership`), a wall-clock
:class:`~subnet.clock.TimeClock` from the run's pinned origin and tick length (and the owner's
changes of it, :mod:`subnet.room.pace`), and no weight sink (scores only feed merges). The run
record pins the topology version, its parameters, the shared protocol settings and the plan
digest; a node whose code compiles another digest refuses to start.
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from ..chain import load_wallet
from ..clock import TimeClock
from ..config import BeamConfig, ConfigError, ProtocolConfig
from ..errors import SetupError
from ..monitor import MetricsSink
from ..neuron.registry import REGISTRIES
from ..neuron.runtime import Runtime
from ..preflight import bucket_hint
from ..storage.base import StorageError
from ..storage.counting import ByteMeter, CountingStore, counting_factory
from ..storage.readers import ReaderPool, s3_reader
from ..storage.s3 import S3Store
from ..topology import PlanError, RunPlan, Template, compile_plan, load_spec
from ..weights import NoWeights
from .address import own_read, parse_address
from .errors import RoomError
from .manifest import RoomRun
from .membership import RoomMembership
from .pace import follow


def run_plan(run: RoomRun, membership: RoomMembership) -> RunPlan:
    """The run's plan compiled here, checked against the digest the run pinned."""
    template = Template(topology=run.topology, params=run.params)
    plan = compile_plan(membership.spec, template, membership.roster, REGISTRIES)
    if plan.digest != run.digest:
        raise SetupError(f"run {run.name!r} pinned plan {run.digest}, this Beam compiles "
                         f"{plan.digest}: install the Beam version the run was started with")  # fmt: skip
    return plan


def build_room_runtime(cfg: BeamConfig, role: str) -> Runtime:
    """Open the wallet, the room, this node's bucket; follow the run's manifest and plan."""
    node = cfg.node
    if not node.run:
        raise ConfigError("--room needs --run NAME; `python -m subnet.room status --room "
                          f"{node.room}` lists the room's runs")  # fmt: skip
    own_read(node.storage)  # a missing bucket is said before anything else is opened
    address = parse_address(node.room, node.storage.region)
    wallet = load_wallet(node.wallet)
    hotkey = wallet.hotkey.ss58_address
    meter = ByteMeter()  # every byte through our bucket and the members' readers is counted
    try:
        rooms = address.open()
        head = rooms.latest()
        run = head.body.run(node.run)
        if run is None:
            raise RoomError("not_found", f"room {address.room!r} has no run {node.run!r}; "
                            f"`python -m subnet.room status --room {node.room}` lists them")  # fmt: skip
        pool = ReaderPool(
            factory=counting_factory(s3_reader, meter), allow_private_endpoints=address.local
        )
        membership = RoomMembership(rooms, run.name, hotkey, load_spec(run.topology), pool)
        membership.refresh()
        membership.join()
        plan = run_plan(run, membership)
    except StorageError as error:
        raise SetupError(f"the room at {node.room} is not readable: {error}") from None
    except PlanError as error:
        raise SetupError(f"run {node.run!r} cannot run with the room's members: {error}") from None
    except ValueError as error:  # a run record this Beam cannot read (template parameters)
        raise SetupError(f"run {node.run!r} is not readable by this Beam: {error}") from None
    try:
        protocol = ProtocolConfig.model_validate(run.protocol)
    except ValueError as error:
        raise SetupError(f"run {node.run!r} pins protocol settings this Beam does not accept "
                         f"({str(error).splitlines()[0]}); install the run's Beam version") from None  # fmt: skip
    if cfg.protocol != ProtocolConfig() and cfg.protocol != protocol:
        logger.warning("ignoring local protocol settings: run {} pins its own", run.name)
    cfg = cfg.model_copy(update={"protocol": protocol})
    store = S3Store.from_config(node.storage)
    try:
        store.check()
        store.check_write_once()
    except StorageError as error:
        hint = bucket_hint(node.storage, error.reason)
        raise SetupError(f"this node's bucket is not usable: {error}; {hint}") from None
    state_dir = Path(node.neuron.state_dir).expanduser() / f"{role}-{hotkey[:8]}"
    metrics = MetricsSink(state_dir / "metrics.jsonl", role=role, hotkey=hotkey,
                          config_hash=protocol.config_hash(), plan=plan.digest)  # fmt: skip
    logger.info("room {} run {}: {} as {}, plan {}, {} s ticks", address.room, run.name, hotkey,
                role, plan.digest, run.tick_seconds)  # fmt: skip
    clock = TimeClock(run.tick_seconds, run.origin, pace=follow(membership))
    return Runtime(cfg=cfg, role=role, signer=wallet.hotkey, store=CountingStore(store, meter),
                   membership=membership, clock=clock, plan=plan,
                   metrics=metrics, state_dir=state_dir, weights=NoWeights(), meter=meter)  # fmt: skip
