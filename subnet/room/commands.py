"""The room CLI's verbs: each reads a :class:`~subnet.room.cli.RoomCommand` and prints for people."""

from __future__ import annotations

import sys
from collections import defaultdict

from ..chain import load_wallet
from ..config import ConfigError
from ..membership.room import room_roster
from ..storage.base import StorageError
from ..storage.keys import PROTOCOL_VERSION, ROOT, parse_key
from ..storage.readers import ReaderPool
from ..topology import load_spec
from . import ops
from .address import RoomAddress, parse_address
from .cli import RoomCommand, duration, read_template, stamp
from .errors import RoomError
from .invite import from_token, make_invite, parse_invite, to_token
from .node import own_read
from .runs import publish_run
from .store import RoomStore


def _address(cfg: RoomCommand) -> RoomAddress:
    if not cfg.node.room:
        raise ConfigError("--room is required: the address `create` printed, e.g. "
                          "http://127.0.0.1:5000/beam-owner/lab")  # fmt: skip
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
    m = ops.create_room(rs, _signer(cfg), read, list(cfg.node.slots))
    slots = ",".join(m.body.members[0].slots) or "no slots"
    print(f"created room {address.room} (owner {m.body.owner} in {slots}, manifest version 0)")
    print(f"room address: {address}")


def invite(cfg: RoomCommand) -> None:
    """Print a signed, single-use invite token (stdout: the token alone)."""
    address, rs = _open(cfg)
    if not cfg.node.permissions:
        raise ConfigError("--permissions is required, e.g. runs.observe,runs.score (validator) "
                          "or runs.train (miner)")  # fmt: skip
    m = rs.latest()
    raw = make_invite(_signer(cfg), m.body, str(address), list(cfg.node.permissions),
                      list(cfg.node.slots), duration(cfg.node.expires))  # fmt: skip
    _, inv = parse_invite(raw)
    print(f"invite {inv.nonce[:8]}: {','.join(inv.permissions)} as {','.join(inv.slots) or '-'}, "
          f"expires {stamp(inv.expires)}", file=sys.stderr)  # fmt: skip
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
    nonce = ops.join_room(rs, _signer(cfg), raw, read)
    print(f"redeemed invite {nonce[:8]} to room {address.room}; you are a member once an "
          f"admitting member runs `python -m subnet.room admit --room {address}`")  # fmt: skip


def admit(cfg: RoomCommand) -> None:
    """Verify pending redemptions (and leaves) and publish the next manifest."""
    _, rs = _open(cfg)
    result = ops.admit(rs, _signer(cfg))
    for hotkey in result.admitted:
        print(f"admitted {hotkey}")
    for hotkey in result.left:
        print(f"removed {hotkey} (left)")
    for key, reason in result.refused.items():
        print(f"refused {key.rsplit('/', 1)[-1]}: {reason}")
    print(f"manifest version {result.manifest.version}")


def members(cfg: RoomCommand) -> None:
    """List the members with their slots and permissions."""
    _, rs = _open(cfg)
    m = rs.latest()
    gone = set(ops.left_members(rs, m))
    print(f"room {m.body.room}, manifest version {m.version}, owner {m.body.owner}")
    for x in m.body.members:
        flags = " admit" if x.admit else ""
        flags += " (left)" if x.hotkey in gone else ""
        print(f"{x.hotkey}  slots={','.join(x.slots) or '-'}  "
              f"permissions={','.join(x.permissions) or '-'}  since=v{x.since}{flags}")  # fmt: skip


def revoke(cfg: RoomCommand) -> None:
    """Take permissions from a member, or the member from the room."""
    if not cfg.node.member:
        raise ConfigError("--member is required: the member's hotkey (see `members`)")
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
    if not cfg.node.run:
        raise ConfigError("--run is required: a name for the run (a-z 0-9 . _ -)")
    address, rs = _open(cfg)
    template = read_template(cfg.node.template)
    m, plan, roster = publish_run(rs, _signer(cfg), cfg.node.run, template, cfg.protocol,
                                  cfg.node.tick_seconds)  # fmt: skip
    print(f"run {cfg.node.run}: {plan.ref}, plan {plan.digest}, manifest version {m.version}")
    for slot in plan.slots.values():
        for hotkey in roster.in_slot(slot.name):
            script = {"holder": "model_holder"}.get(slot.role, slot.role)
            print(f"  {slot.name:10} {hotkey}: python neurons/{script}.py --room {address} "
                  f"--run {cfg.node.run} --wallet.name ... --storage.bucket ...")  # fmt: skip


def status(cfg: RoomCommand) -> None:
    """Members, runs, rounds and the last model version, and what each member did last."""
    address, rs = _open(cfg)
    m = rs.latest()
    members(cfg)
    pool = ReaderPool(allow_private_endpoints=address.local)
    pool.update({x.hotkey: x.read for x in m.body.members})
    for r in m.body.runs:
        if cfg.node.run and r.name != cfg.node.run:
            continue
        spec = load_spec(r.topology)
        roster = room_roster(m, spec)
        print(f"run {r.name}: {r.topology} plan {r.digest}, started {stamp(r.origin)}, "
              f"tick {r.tick_seconds:g} s")  # fmt: skip
        run_key = r.protocol.get("run", r.name)
        _model_line(pool, roster, spec, run_key)
        for hotkey in roster.hotkeys():
            slots = ",".join(sorted(roster.get(hotkey).slots)) or "-"
            print(f"  {hotkey} ({slots}): {_last_objects(pool, hotkey, run_key)}")


def _model_line(pool: ReaderPool, roster, spec, run_key: str) -> None:
    from ..versions import SyncError
    from ..versions.manifest import read_pointer

    holders = [hk for name, role in spec.roles.items() if "model" in role.holds
               for hk in roster.in_slot(name)]  # fmt: skip
    for hotkey in holders:
        reader = pool.get(hotkey)
        try:
            latest = read_pointer(reader, run_key, hotkey) if reader else None
        except (SyncError, StorageError) as error:
            print(f"  model: none yet ({getattr(error, 'reason', error)})")
            continue
        if latest is not None:
            print(f"  model: version {latest.version} (window {latest.window}), "
                  f"{latest.version} merged rounds, digest {latest.digest[:16]}")  # fmt: skip


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
