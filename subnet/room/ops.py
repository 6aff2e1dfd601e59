"""Room operations: create, admit, revoke, leave, start a run, pace it. What the CLI and the harness call.

Each takes a :class:`~subnet.room.store.RoomStore` and a signer, reads the latest manifest,
checks the request against it and publishes the next version (checked as every reader will check
it). None of them prints, exits or reads flags.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loguru import logger

from ..membership.roster import PERMISSIONS
from .errors import RoomError
from .invite import check_leave, check_redemption, make_leave, make_redemption, parse_invite
from .manifest import Manifest, PaceChange, RoomManifest, RoomMember, RoomRun
from .store import RoomStore

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch


def next_body(
    m: Manifest,
    *,
    members: list[RoomMember] | None = None,
    runs: list[RoomRun] | None = None,
    redeemed: list[str] | None = None,
) -> RoomManifest:
    """The body of the version after ``m`` with the given parts replaced (members sorted)."""
    data = m.body.model_dump(mode="json")
    if members is not None:
        data["members"] = [x.model_dump(mode="json") for x in sorted(members, key=_hotkey)]
    if runs is not None:
        data["runs"] = [r.model_dump(mode="json") for r in runs]
    if redeemed is not None:
        data["redeemed"] = sorted(redeemed)
    data.update(version=m.version + 1, prev=m.digest, created=time.time())
    return RoomManifest.model_validate(data)


def _hotkey(member: RoomMember) -> str:
    return member.hotkey


def create_room(
    rs: RoomStore, owner: Signer, read: str, slots: list[str] = (), name: str = ""
) -> Manifest:
    """Version 0: the owner is the only member, with every permission and the admit right."""
    try:
        me = RoomMember(
            hotkey=owner.ss58_address,
            read=read,
            permissions=sorted(PERMISSIONS),
            slots=sorted(slots),
            admit=True,
            name=name,
        )
    except ValueError as error:
        raise RoomError("bad_request", str(error).splitlines()[-1].strip()) from None
    body = RoomManifest(
        room=rs.room, owner=owner.ss58_address, version=0, members=[me], created=time.time()
    )
    return rs.create(owner, body)


def join_room(rs: RoomStore, joiner: Signer, invite_raw: bytes, read: str, name: str = "") -> str:
    """Write the joiner's redemption of an invite; returns its nonce (admission follows).
    ``name``: what members call the joiner (the invite's name when empty)."""
    _, invite = parse_invite(invite_raw)
    if invite.room != rs.room:
        raise RoomError("wrong_room", f"the invite is for room {invite.room!r}")
    current = rs.latest(owner=invite.owner)
    if current.body.member(joiner.ss58_address) is not None:
        raise RoomError("already_member", f"{joiner.ss58_address} is a member already")
    rs.redeem(invite.nonce, make_redemption(joiner, invite_raw, read, name))
    return invite.nonce


@dataclass
class AdmitResult:
    """What one admission pass did."""

    manifest: Manifest
    admitted: list[str] = field(default_factory=list)  # hotkeys
    left: list[str] = field(default_factory=list)  # hotkeys dropped after a leave
    refused: dict[str, str] = field(default_factory=dict)  # redemption key -> reason code


def admit(rs: RoomStore, admitter: Signer) -> AdmitResult:
    """Verify pending redemptions (and, for the owner, leaves) and publish the next manifest."""
    m = rs.latest()
    if not m.body.may_admit(admitter.ss58_address):
        raise RoomError("not_authorized", f"{admitter.ss58_address} may not admit members")
    out = AdmitResult(m)
    members = {x.hotkey: x for x in m.body.members}
    redeemed = list(m.body.redeemed)
    for key, raw, written in rs.redemptions():
        if key.rsplit("/", 1)[-1].removesuffix(".json") in redeemed:
            continue  # admitted (or refused as reused) already
        try:
            member, nonce = check_redemption(raw, m.body, written)
            if key != rs.redemption_key(nonce):  # else the real nonce would stay unrecorded
                raise RoomError("malformed", "a redemption must sit under its invite's nonce")
            if nonce in redeemed:  # redeemed earlier in this same pass
                raise RoomError("reused", f"invite {nonce[:8]} was redeemed already")
            if member.hotkey in members:
                raise RoomError("already_member", f"{member.hotkey} is a member already")
        except RoomError as error:
            out.refused[key] = error.reason
            logger.info("refused redemption {}: {}", key, error)
            continue
        members[member.hotkey] = member
        redeemed.append(nonce)
        out.admitted.append(member.hotkey)
    if admitter.ss58_address == m.body.owner:
        out.left = [hk for hk in left_members(rs, m) if hk in members and hk != m.body.owner]
        for hk in out.left:
            del members[hk]
    if out.admitted or out.left:
        body = next_body(m, members=list(members.values()), redeemed=sorted(redeemed))
        out.manifest = rs.publish(admitter, m, body)
    return out


def left_members(rs: RoomStore, m: Manifest) -> list[str]:
    """Members with a valid leave signed since they were admitted."""
    gone = []
    for key, raw, _ in rs.leaves():
        hotkey = key.rsplit("/", 1)[-1].removesuffix(".json")
        member = m.body.member(hotkey)
        try:
            leave = check_leave(raw, m.body, hotkey)
        except RoomError as error:
            logger.info("ignoring leave {}: {}", key, error)
            continue
        if member is not None and leave.version >= member.since:
            gone.append(hotkey)
    return gone


def revoke(rs: RoomStore, owner: Signer, hotkey: str, permissions: list[str] | None) -> Manifest:
    """Take ``permissions`` from a member (all of them, and membership, when None); ``hotkey``
    may also be the member's name."""
    m = rs.latest()
    _require_owner(m, owner)
    member = m.body.named(hotkey)
    if member is None:
        raise RoomError(
            "not_member",
            f"{hotkey} is not a member of room {rs.room!r} (by "
            "hotkey, or by a name only one member has); `members` lists them",
        )
    hotkey = member.hotkey
    if hotkey == m.body.owner:
        raise RoomError("bad_request", "the owner cannot revoke itself; create a new room instead")
    others = [x for x in m.body.members if x.hotkey != hotkey]
    if permissions is not None:
        unknown = sorted(set(permissions) - PERMISSIONS)
        if unknown:
            raise RoomError("bad_request", f"unknown permissions {unknown}")
        kept = sorted(set(member.permissions) - set(permissions))
        others.append(member.model_copy(update={"permissions": kept}))
    return rs.publish(owner, m, next_body(m, members=others))


def leave(rs: RoomStore, member: Signer) -> None:
    """Write this member's signed leave (it counts at once; the owner drops it next)."""
    m = rs.latest()
    rs.store.put(rs.leave_key(member.ss58_address), make_leave(member, m.body))


def start_run(rs: RoomStore, owner: Signer, run: RoomRun) -> Manifest:
    """Publish ``run`` in the room (its plan was compiled against the roster by the caller)."""
    m = rs.latest()
    _require_owner(m, owner)
    if m.body.run(run.name) is not None:
        raise RoomError("conflict", f"run {run.name!r} exists already; pick another --run name")
    return rs.publish(owner, m, next_body(m, runs=[*m.body.runs, run]))


def add_pace(rs: RoomStore, owner: Signer, run: str, tick: int, seconds: float) -> Manifest:
    """Publish that run ``run``'s ticks last ``seconds`` from ``tick`` on (owner only); the
    change must follow the run's last one (members may hold the earlier ones already)."""
    m = rs.latest()
    _require_owner(m, owner)
    record = m.body.run(run)
    if record is None:
        raise RoomError("not_found", f"room {m.body.room!r} has no run {run!r}")
    if record.pace and tick <= record.pace[-1].tick:
        raise RoomError(
            "conflict",
            f"run {run!r} changes pace at tick {record.pace[-1].tick} already; "
            f"a change at tick {tick} must come after it",
        )
    try:
        change = PaceChange(tick=tick, seconds=seconds)
    except ValueError as error:
        raise RoomError("bad_request", str(error).splitlines()[-1].strip()) from None
    paced = record.model_copy(update={"pace": [*record.pace, change]})
    runs = [paced if r.name == run else r for r in m.body.runs]
    return rs.publish(owner, m, next_body(m, runs=runs))


def _require_owner(m: Manifest, signer: Signer) -> None:
    if signer.ss58_address != m.body.owner:
        raise RoomError(
            "not_authorized",
            f"only the owner {m.body.owner} may do that; use the owner's wallet (--wallet.name)",
        )
