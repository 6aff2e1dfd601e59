"""Room mode's runtime: what ``neurons/*.py --room ADDRESS --run NAME`` runs with.

The same roles and the same compiled topology as subnet mode, with other seams: membership from
the room's signed manifest (:class:`~subnet.room.membership.RoomMembership`), a wall-clock
:class:`~subnet.clock.TimeClock` from the run's pinned origin and tick length (and the owner's
changes of it, :mod:`subnet.room.pace`), and no weight sink (scores only feed merges), handed
to the one runtime builder both modes share (:mod:`subnet.neuron.seams`). The run record pins
the topology version, its parameters, the shared protocol settings and the plan digest; a node
whose code compiles another digest refuses to start.
"""

from __future__ import annotations

from loguru import logger

from ..chain import load_wallet
from ..clock import TimeClock
from ..config import BeamConfig, ConfigError, ProtocolConfig
from ..errors import SetupError
from ..neuron.registry import REGISTRIES
from ..neuron.runtime import Runtime
from ..neuron.seams import Seams, make_runtime, open_bucket
from ..storage.base import StorageError
from ..storage.counting import ByteMeter, counting_factory
from ..storage.readers import ReaderPool, s3_reader
from ..topology import PlanError, RunPlan, Template, compile_plan, load_spec
from ..weights import NoWeights
from .address import RoomAddress, own_read, parse_address
from .errors import RoomError
from .manifest import RoomRun
from .membership import RoomMembership
from .pace import follow

STATUS = "`python -m subnet.room status --room {room}`"  # what lists a room's runs


def run_plan(run: RoomRun, membership: RoomMembership) -> RunPlan:
    """The run's plan compiled here, checked against the digest the run pinned."""
    template = Template(topology=run.topology, params=run.params)
    plan = compile_plan(membership.spec, template, membership.roster, REGISTRIES)
    if plan.digest != run.digest:
        raise SetupError(
            f"run {run.name!r} pinned plan {run.digest}, this Beam compiles {plan.digest}: "
            "install the Beam version the run was started with"
        )
    return plan


def build_room_runtime(cfg: BeamConfig, role: str) -> Runtime:
    """Open the wallet, the room, this node's bucket; follow the run's manifest and plan."""
    node = cfg.node
    if not node.run:
        raise ConfigError(
            f"--room needs --run NAME; {STATUS.format(room=node.room)} lists the room's runs"
        )
    own_read(node.storage)  # a missing bucket is said before anything else is opened
    address = parse_address(node.room, node.storage.region)
    wallet = load_wallet(node.wallet)
    meter = ByteMeter()  # every byte through our bucket and the members' readers is counted
    run, membership, plan = follow_run(cfg, address, wallet.hotkey.ss58_address, meter)
    protocol = pinned_protocol(run)
    if cfg.protocol != ProtocolConfig() and cfg.protocol != protocol:
        logger.warning("ignoring local protocol settings: run {} pins its own", run.name)
    cfg = cfg.model_copy(update={"protocol": protocol})
    store = open_bucket(node.storage, meter)
    logger.info(
        "room {} run {}: {} as {}, plan {}, {} s ticks",
        address.room,
        run.name,
        wallet.hotkey.ss58_address,
        role,
        plan.digest,
        run.tick_seconds,
    )
    clock = TimeClock(run.tick_seconds, run.origin, pace=follow(membership))
    seams = Seams(
        clock=clock,
        membership=membership,
        weights=NoWeights(),  # scores only feed merges
        plan=plan,
        tick_seconds=clock.seconds,  # ticks are time; no beacon, so no checks of training
        labels={"room": node.room, "run": run.name},
    )
    return make_runtime(cfg, role, wallet.hotkey, store, seams)


def follow_run(
    cfg: BeamConfig, address: RoomAddress, hotkey: str, meter: ByteMeter
) -> tuple[RoomRun, RoomMembership, RunPlan]:
    """The run ``--run`` names in the room at ``address``, its membership (joined) and its plan
    compiled here; ``SetupError`` in one line for a room or a run this node cannot follow."""
    node = cfg.node
    try:
        rooms = address.open()
        run = rooms.latest().body.run(node.run)
        if run is None:
            where = STATUS.format(room=node.room)
            raise RoomError(
                "not_found", f"room {address.room!r} has no run {node.run!r}; {where} lists them"
            )
        pool = ReaderPool(
            factory=counting_factory(s3_reader, meter), allow_private_endpoints=address.local
        )
        membership = RoomMembership(rooms, run.name, hotkey, load_spec(run.topology), pool)
        membership.refresh()
        membership.join()
        return run, membership, run_plan(run, membership)
    except StorageError as error:
        raise SetupError(f"the room at {node.room} is not readable: {error}") from None
    except PlanError as error:
        raise SetupError(f"run {node.run!r} cannot run with the room's members: {error}") from None
    except ValueError as error:  # a run record this Beam cannot read (template parameters)
        raise SetupError(f"run {node.run!r} is not readable by this Beam: {error}") from None


def pinned_protocol(run: RoomRun) -> ProtocolConfig:
    """The protocol settings the run pins; ``SetupError`` if this Beam does not accept them."""
    try:
        return ProtocolConfig.model_validate(run.protocol)
    except ValueError as error:
        first = str(error).splitlines()[0]
        raise SetupError(
            f"run {run.name!r} pins protocol settings this Beam does not accept ({first}); "
            "install the run's Beam version"
        ) from None
