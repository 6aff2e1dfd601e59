"""The room CLI's verbs: each reads a :class:`~subnet.room.settings.RoomCommand` and prints for
people (stdout: the answer; stderr: notes around it)."""

from __future__ import annotations

import sys
from collections import defaultdict

from ..chain import load_wallet
from ..config import ConfigError
from ..storage.base import StorageError
from ..storage.keys import PROTOCOL_VERSION, ROOT, parse_key
from ..storage.readers import ReaderPool
from ..topology import PlanError, builtin_specs, load_spec
from . import ops
from .address import RoomAddress, own_read, parse_address
from .errors import RoomError
from .invite import from_token, make_invite, parse_invite, to_token
from .manifest import Manifest, RoomMember
from .membership import room_roster, slot_needs
from .settings import RoomCommand, duration, stamp
from .store import RoomStore
from .template import read_template

SCRIPTS = {"holder": "model_holder"}  # role class -> neurons/<script>.py, where they differ


def _address(cfg: RoomCommand) -> RoomAddress:
    if not cfg.node.room:
        raise ConfigError(
            "--room is required: the address `create` printed, e.g. "
            "http://127.0.0.1:5000/beam-owner/lab"
        )
    region = cfg.node.storage.region if cfg.node.storage else "us-east-1"
    return parse_address(cfg.node.room, region)


def _open(cfg: RoomCommand) -> tuple[RoomAddress, RoomStore]:
    address = _address(cfg)
    return address, address.open()


def _signer(cfg: RoomCommand):
    return load_wallet(cfg.node.wallet).hotkey


def create(cfg: RoomCommand) -> None:
    """Publish version 0 of a new room owned by this wallet."""
    read = own_read(cfg.node.storage)
    address, rs = _open(cfg)
    m = ops.create_room(rs, _signer(cfg), read, list(cfg.node.slot), cfg.node.name)
    slots = ",".join(m.body.members[0].slots) or "no slots"
    print(
        f"created room {address.room} (owner {m.body.members[0].label} in {slots}, manifest "
        "version 0)"
    )
    print(f"room address: {address}")


def slot_permissions(slots: list[str], template: str = "") -> list[str]:
    """What a member needs to count in ``slots``: from ``template``'s topology, else from the
    builtin topologies that have slots of those names (when they all agree)."""
    specs = [load_spec(read_template(template).topology)] if template else builtin_specs()
    needs: set[str] = set()
    for slot in slots:
        found = {needs_[slot] for spec in specs if slot in (needs_ := slot_needs(spec))}
        where = f"{specs[0].ref}" if template else "any builtin topology"
        if not found:
            raise ConfigError(
                f"--slot {slot}: no such slot in {where}; name the topology's "
                "slot (docs/topologies.md) or give --permissions"
            )
        if len(found) > 1:
            options = " or ".join(",".join(sorted(x)) for x in sorted(found, key=sorted))
            raise ConfigError(
                f"--slot {slot} needs {options} depending on the topology; give "
                "--template @beam/NAME@VERSION or --permissions"
            )
        needs |= next(iter(found))
    return sorted(needs)


def invite(cfg: RoomCommand) -> None:
    """Print a signed, single-use invite token (stdout: the token alone)."""
    address, rs = _open(cfg)
    slots = list(cfg.node.slot)
    permissions = list(cfg.node.permissions)
    if not permissions:
        if not slots:
            raise ConfigError(
                "--slot is required: the slot the member fills (e.g. miner, "
                "validator, worker), or give --permissions"
            )
        permissions = slot_permissions(slots, cfg.node.template)
    m = rs.latest()
    raw = make_invite(
        _signer(cfg),
        m.body,
        str(address),
        permissions,
        slots,
        duration(cfg.node.expires),
        name=cfg.node.name,
    )
    _, inv = parse_invite(raw)
    who = f"{inv.name}: " if inv.name else ""
    print(
        f"invite {inv.nonce[:8]}: {who}{','.join(inv.permissions)} as "
        f"{','.join(inv.slots) or '-'}, expires {stamp(inv.expires)}",
        file=sys.stderr,
    )
    print(to_token(raw))


def join(cfg: RoomCommand) -> None:
    """Redeem an invite: write this wallet's signed redemption for an admitting member."""
    if not cfg.node.invite:
        raise ConfigError("--invite is required: the beam-invite:... token you were given")
    raw = from_token(cfg.node.invite)
    _, inv = parse_invite(raw)
    address = parse_address(inv.location)
    if cfg.node.room and parse_address(cfg.node.room) != address:
        raise RoomError("wrong_room", f"the invite is for {address}, not {cfg.node.room}")
    read = own_read(cfg.node.storage)
    rs = address.open()
    nonce = ops.join_room(rs, _signer(cfg), raw, read, cfg.node.name)
    print(
        f"redeemed invite {nonce[:8]} to room {address.room}; you are a member once an "
        f"admitting member runs `python -m subnet.room admit --room {address}`"
    )


def admit(cfg: RoomCommand) -> None:
    """Verify pending redemptions (and leaves) and publish the next manifest."""
    _, rs = _open(cfg)
    result = ops.admit(rs, _signer(cfg))
    members = {x.hotkey: x for x in result.manifest.body.members}
    for hotkey in result.admitted:
        name = members[hotkey].name if hotkey in members else ""
        print(f"admitted {name + ' ' if name else ''}{hotkey}")
    for hotkey in result.left:
        print(f"removed {hotkey} (left)")
    for key, reason in result.refused.items():
        print(f"refused {key.rsplit('/', 1)[-1]}: {reason}")
    print(f"manifest version {result.manifest.version}")


def members(cfg: RoomCommand) -> None:
    """List the members: name, hotkey, slots, permissions."""
    _, rs = _open(cfg)
    _print_members(rs, rs.latest())


def _print_members(rs: RoomStore, m: Manifest) -> None:
    gone = set(ops.left_members(rs, m))
    print(
        f"room {m.body.room}, manifest version {m.version}, owner "
        f"{m.body.member(m.body.owner).label}"
    )
    width = max(len(x.name) for x in m.body.members) or 1
    for x in m.body.members:
        print(_member_line(x, width, gone))


def _member_line(x: RoomMember, width: int, gone: set[str]) -> str:
    flags = " admit" if x.admit else ""
    flags += " (left)" if x.hotkey in gone else ""
    return (
        f"{x.name or '-':<{width}}  {x.hotkey}  slots={','.join(x.slots) or '-'}  "
        f"permissions={','.join(x.permissions) or '-'}  since=v{x.since}{flags}"
    )


def revoke(cfg: RoomCommand) -> None:
    """Take permissions from a member, or the member from the room."""
    if not cfg.node.member:
        raise ConfigError("--member is required: the member's name or hotkey (see `members`)")
    _, rs = _open(cfg)
    perms = list(cfg.node.permissions) or None
    m = ops.revoke(rs, _signer(cfg), cfg.node.member, perms)
    what = f"{','.join(perms)} from" if perms else "membership of"
    print(f"revoked {what} {cfg.node.member}; manifest version {m.version}")


def leave(cfg: RoomCommand) -> None:
    """Leave the room (a signed leave; it counts at once)."""
    address, rs = _open(cfg)
    ops.leave(rs, _signer(cfg))
    print(f"left room {address.room}")


def run(cfg: RoomCommand) -> None:
    """Publish a run: topology pinned by exact version and plan digest, and its protocol."""
    from .runs import publish_run

    if not cfg.node.run:
        raise ConfigError("--run is required: a name for the run (a-z 0-9 . _ -)")
    address, rs = _open(cfg)
    template = read_template(cfg.node.template, cfg.node.param)
    m, plan, roster = publish_run(
        rs, _signer(cfg), cfg.node.run, template, cfg.protocol, cfg.node.tick_seconds
    )
    params = ", ".join(f"{k}={v}" for k, v in sorted(template.params.items()))
    print(
        f"run {cfg.node.run}: {plan.ref}, plan {plan.digest}, manifest version {m.version}"
        + (f", {params}" if params else "")
    )
    for slot in plan.slots.values():
        for hotkey in roster.in_slot(slot.name):
            script = SCRIPTS.get(slot.role, slot.role)
            member = m.body.member(hotkey)
            who = member.label if member else hotkey
            print(
                f"  {slot.name:10} {who}: python neurons/{script}.py --room {address} "
                f"--run {cfg.node.run} --wallet.name ... --storage.bucket ..."
            )


def pace(cfg: RoomCommand) -> None:
    """Change a run's tick length (owner): from the start of the window after next."""
    import time

    from ..clock.ticks import TimeClock
    from ..config import WindowConfig
    from .pace import change_tick

    if not cfg.node.run:
        raise ConfigError("--run is required: the run to pace (`status` lists the runs)")
    _, rs = _open(cfg)
    r = rs.latest().body.run(cfg.node.run)
    if r is None:
        raise RoomError("not_found", f"room {rs.room!r} has no run {cfg.node.run!r}")
    clock = TimeClock(r.tick_seconds, r.origin, pace=r.pace_changes)
    blocks = WindowConfig.model_validate(r.protocol.get("window", {})).blocks
    last = r.pace[-1].tick if r.pace else None
    tick = change_tick(clock.now(), blocks, last)
    if tick is None:
        wait = clock.start_of(last) - time.time()
        raise RoomError(
            "conflict", f"the change at tick {last} takes effect in {wait:.0f} s; pace after it"
        )
    m = ops.add_pace(rs, _signer(cfg), r.name, tick, cfg.node.tick_seconds)
    print(
        f"run {r.name}: ticks last {cfg.node.tick_seconds:g} s from tick {tick} (window "
        f"{tick // blocks}, in {clock.start_of(tick) - time.time():.0f} s); "
        f"manifest version {m.version}"
    )


def status(cfg: RoomCommand) -> None:
    """Members, runs, rounds and the last model version, and what each member did last."""
    address, rs = _open(cfg)
    m = rs.latest()
    runs = [r for r in m.body.runs if not cfg.node.run or r.name == cfg.node.run]
    if cfg.node.run and not runs:
        names = ", ".join(r.name for r in m.body.runs)
        have = f"its runs: {names}" if names else "it has no runs yet (start one with `run`)"
        raise RoomError("not_found", f"room {m.body.room!r} has no run {cfg.node.run!r}; {have}")
    _print_members(rs, m)
    pool = ReaderPool(allow_private_endpoints=address.local)
    pool.update({x.hotkey: x.read for x in m.body.members})
    for r in runs:
        try:
            spec = load_spec(r.topology)
        except PlanError as error:
            print(f"run {r.name}: {r.topology}, which this Beam does not know ({error.reason})")
            continue
        roster = room_roster(m, spec)
        print(
            f"run {r.name}: {r.topology} plan {r.digest}, started {stamp(r.origin)}, "
            f"tick {r.tick_seconds:g} s"
            + "".join(f", {p.seconds:g} s from tick {p.tick}" for p in r.pace[-3:])
        )
        run_key = r.protocol.get("run", r.name)
        _model_line(pool, roster, spec, run_key)
        for hotkey in roster.hotkeys():
            slots = ",".join(sorted(roster.get(hotkey).slots)) or "-"
            member = m.body.member(hotkey)
            who = member.label if member else hotkey
            print(f"  {who} ({slots}): {_last_objects(pool, hotkey, run_key)}")


def _model_line(pool: ReaderPool, roster, spec, run_key: str) -> None:
    from ..versions import SyncError
    from ..versions.manifest import read_pointer

    holders = [
        hk
        for name, role in spec.roles.items()
        if "model" in role.holds
        for hk in roster.in_slot(name)
    ]
    for hotkey in holders:
        reader = pool.get(hotkey)
        try:
            latest = read_pointer(reader, run_key, hotkey) if reader else None
        except (SyncError, StorageError) as error:
            print(f"  model: none yet ({getattr(error, 'reason', error)})")
            continue
        if latest is not None:
            print(
                f"  model: version {latest.version} (window {latest.window}), "
                f"{latest.version} merged rounds, digest {latest.digest[:16]}"
            )


def _last_objects(pool: ReaderPool, hotkey: str, run_key: str) -> str:
    """The newest window per lane this member wrote (what it is doing)."""
    reader = pool.get(hotkey)
    if reader is None:
        return "no readable bucket"
    newest: dict[str, int] = defaultdict(lambda: -1)
    try:
        for info in reader.list(f"{ROOT}/v{PROTOCOL_VERSION}/{run_key}/"):
            try:
                parts = parse_key(info.key)
            except ValueError:
                continue
            if parts.sender == hotkey and parts.window is not None:
                lane = f"{parts.lane}/{parts.kind.value}"
                newest[lane] = max(newest[lane], parts.window)
    except StorageError as error:
        return f"bucket unreadable ({error.reason})"
    if not newest:
        return "nothing written yet"
    return ", ".join(f"{lane} window {w}" for lane, w in sorted(newest.items()))
