"""Starting a run in a room: compile the topology against the room's roster, pin it, publish it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..config import ProtocolConfig
from ..membership import Roster
from ..topology import PlanError, RunPlan, Template, compile_plan, load_spec
from . import ops
from .errors import RoomError
from .manifest import Manifest, RoomRun
from .membership import room_roster
from .store import RoomStore

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch


def publish_run(
    rs: RoomStore,
    owner: Signer,
    name: str,
    template: Template,
    protocol: ProtocolConfig,
    tick_seconds: float,
    origin: float | None = None,
) -> tuple[Manifest, RunPlan, Roster]:
    """Compile ``template`` with the room's members and publish the run (owner only).

    The run pins the exact topology version, its parameters, the shared protocol settings (with
    ``run`` set to the run's name, so its objects never mix with another run's) and the plan
    digest every member's node must reproduce. Its ticks start now, or at ``origin`` (unix time;
    a later origin lets every member's process start before round 0).
    """
    from ..neuron.registry import REGISTRIES  # the role code (torch): only a run needs it

    try:
        spec = load_spec(template.topology)
    except PlanError as error:
        raise RoomError("bad_request", f"--template: {error}") from None
    protocol = protocol.model_copy(update={"run": name, "holder_hotkey": ""})
    params = dict(template.params)
    if "protocol" in spec.params:  # the digest then covers every shared protocol setting
        params["protocol"] = protocol.config_hash()
    m = rs.latest()
    roster = room_roster(m, spec, frozenset(ops.left_members(rs, m)))
    try:
        plan = compile_plan(
            spec, Template(topology=template.topology, params=params), roster, REGISTRIES
        )
    except PlanError as error:
        raise RoomError(
            "bad_request",
            f"{template.topology} cannot run with this room's members: {error}; "
            "invite members for that slot first",
        ) from None
    try:
        record = RoomRun(
            name=name,
            topology=plan.ref,
            params=params,
            digest=plan.digest,
            protocol=protocol.model_dump(mode="json"),
            tick_seconds=tick_seconds,
            origin=time.time() if origin is None else origin,
        )
    except ValueError as error:
        raise RoomError("bad_request", str(error).splitlines()[-1].strip()) from None
    return ops.start_run(rs, owner, record), plan, roster
