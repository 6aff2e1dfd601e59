"""The room manifest: who is in the room, with which permissions and slots, and its runs.

A manifest is a signed ``room-manifest`` document (:mod:`subnet.room.signed`). Version 0 is
signed by the owner and names it; every later version names its predecessor's digest and is
signed by the owner, or by an admitting member (``admit``) of the previous version, who may only
add members (with permissions it holds itself) and record redeemed invite nonces. Anything else
is refused by :func:`check_transition`: a reader that follows versions one by one therefore
holds a manifest the owner authorised, whoever wrote the bytes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..membership.roster import PERMISSIONS
from ..storage.commitment import CommitmentError, decode_commitment
from .errors import RoomError
from .signed import SignedDoc, parse_doc, sign_doc

KIND = "room-manifest"
NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"  # room and run names: they name storage keys
SS58 = r"^[1-9A-HJ-NP-Za-km-z]{46,48}$"
NONCE = r"^[0-9a-f]{32}$"
DIGEST = r"^[0-9a-f]{64}$"
SlotName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
# A member's name, for people (``members``, ``status``, ``revoke --member``); the hotkey is
# what counts. Empty: none given.
MemberName = Annotated[str, Field(pattern=r"^([A-Za-z0-9][A-Za-z0-9._-]{0,31})?$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _check_permissions(values: list[str]) -> list[str]:
    unknown = sorted(set(values) - PERMISSIONS)
    if unknown:
        raise ValueError(f"unknown permissions {unknown}; known: {sorted(PERMISSIONS)}")
    if len(set(values)) != len(values):
        raise ValueError("a permission is listed twice")
    return sorted(values)


class RoomMember(_Strict):
    """One member: its hotkey, how to read its bucket, what it may do, the slots it fills."""

    hotkey: str = Field(pattern=SS58)
    read: str = Field(max_length=512)  # a storage commitment string (subnet.storage.commitment)
    permissions: list[str] = Field(max_length=len(PERMISSIONS))
    slots: list[SlotName] = Field(default_factory=list, max_length=16)
    admit: bool = False  # may issue invites and admit redemptions
    since: int = Field(0, ge=0)  # the manifest version that admitted it
    name: MemberName = ""  # what people call it (the invite's, or the joiner's own)

    @property
    def label(self) -> str:
        """``name (5FKhgVxx…)`` for people, or the hotkey alone without a name."""
        return f"{self.name} ({self.hotkey[:8]}…)" if self.name else self.hotkey

    @field_validator("permissions")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _check_permissions(value)

    @field_validator("read")
    @classmethod
    def _readable(cls, value: str) -> str:
        if value:
            try:
                decode_commitment(value)
            except CommitmentError as error:
                raise ValueError(f"read settings: {error}") from None
        return value


class PaceChange(_Strict):
    """From tick ``tick`` on, a tick of the run lasts ``seconds`` (the owner lengthens or
    shortens a run's ticks to the work measured in it; see :mod:`subnet.room.pace`)."""

    tick: int = Field(ge=1)
    seconds: float = Field(gt=0, le=3600)


class RoomRun(_Strict):
    """A run started in the room: its topology pinned by exact version and plan digest.

    ``pace`` lists the changes of tick length after ``tick_seconds``, in tick order: members
    follow them to agree on the tick (:class:`~subnet.clock.ticks.TimeClock`).
    """

    name: str = Field(pattern=NAME)
    topology: str = Field(max_length=128)  # "@beam/scored-subnet@2.0.0"
    params: dict[str, Any] = Field(default_factory=dict, max_length=64)
    digest: str = Field(pattern=r"^[0-9a-f]{16}$")
    protocol: dict[str, Any] = Field(default_factory=dict, max_length=64)  # shared [protocol]
    tick_seconds: float = Field(gt=0, le=3600)
    origin: float = Field(ge=0)  # unix time of tick 0
    stopped: bool = False
    pace: list[PaceChange] = Field(default_factory=list, max_length=4096)

    @field_validator("pace")
    @classmethod
    def _in_order(cls, value: list[PaceChange]) -> list[PaceChange]:
        if any(b.tick <= a.tick for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("pace changes must be in increasing tick order")
        return value

    def pace_changes(self) -> list[tuple[int, float]]:
        """``(tick, seconds)`` of every change, for a clock."""
        return [(p.tick, p.seconds) for p in self.pace]


class RoomManifest(_Strict):
    """The body of one manifest version."""

    room: str = Field(pattern=NAME)
    owner: str = Field(pattern=SS58)
    version: int = Field(ge=0)
    prev: str | None = Field(None, pattern=DIGEST)  # digest of version - 1
    members: list[RoomMember] = Field(default_factory=list, max_length=1024)
    runs: list[RoomRun] = Field(default_factory=list, max_length=256)
    redeemed: list[Annotated[str, Field(pattern=NONCE)]] = Field(
        default_factory=list, max_length=65536
    )
    created: float = Field(ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> RoomManifest:
        hotkeys = [m.hotkey for m in self.members]
        if len(set(hotkeys)) != len(hotkeys):
            raise ValueError("a hotkey is listed twice")
        if self.owner not in hotkeys:
            raise ValueError("the owner is not a member")
        if len({r.name for r in self.runs}) != len(self.runs):
            raise ValueError("a run name is listed twice")
        if len(set(self.redeemed)) != len(self.redeemed):
            raise ValueError("a nonce is listed twice")
        if (self.prev is None) != (self.version == 0):
            raise ValueError("every version but 0 names its predecessor, and 0 names none")
        return self

    def member(self, hotkey: str) -> RoomMember | None:
        """The member with ``hotkey``, or None."""
        return next((m for m in self.members if m.hotkey == hotkey), None)

    def named(self, who: str) -> RoomMember | None:
        """The member whose hotkey or name is ``who`` (a name must be unique), or None."""
        by_name = [m for m in self.members if m.name and m.name == who]
        return self.member(who) or (by_name[0] if len(by_name) == 1 else None)

    def run(self, name: str) -> RoomRun | None:
        """The run called ``name``, or None."""
        return next((r for r in self.runs if r.name == name), None)

    def may_admit(self, hotkey: str) -> bool:
        """Whether ``hotkey`` may issue invites and admit members (the owner, or an admitter)."""
        m = self.member(hotkey)
        return hotkey == self.owner or (m is not None and m.admit)


class Manifest:
    """A verified manifest version: the signed document and its parsed body."""

    def __init__(self, doc: SignedDoc, body: RoomManifest) -> None:
        self.doc, self.body = doc, body

    @property
    def version(self) -> int:
        """The version number."""
        return self.body.version

    @property
    def digest(self) -> str:
        """The digest the next version names as ``prev``."""
        return self.doc.digest


def encode_manifest(signer, body: RoomManifest) -> bytes:
    """Sign ``body`` as a manifest document."""
    return sign_doc(signer, KIND, body.model_dump(mode="json"))


def parse_manifest(raw: bytes) -> Manifest:
    """Verify a manifest document's signature and schema (not yet its authority: see
    :func:`check_genesis` and :func:`check_transition`)."""
    doc = parse_doc(raw, KIND)
    try:
        body = RoomManifest.model_validate(doc.body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RoomError("malformed", f"manifest {where}: {first['msg']}") from None
    return Manifest(doc, body)


def check_genesis(m: Manifest, room: str, owner: str | None = None) -> None:
    """Version 0 of ``room``, signed by its owner (``owner`` pins the expected one)."""
    if m.body.room != room:
        raise RoomError("wrong_room", f"manifest of room {m.body.room!r}, expected {room!r}")
    if m.version != 0:
        raise RoomError("bad_transition", f"version {m.version} where version 0 was expected")
    if m.doc.signer != m.body.owner:
        raise RoomError("not_authorized", "version 0 is not signed by the owner it names")
    if owner is not None and m.body.owner != owner:
        raise RoomError("forged", f"room {room!r} is owned by {m.body.owner}, expected {owner}")


def check_transition(prev: Manifest, nxt: Manifest) -> None:
    """Refuse a version that does not follow ``prev`` or that its signer may not publish."""
    a, b, signer = prev.body, nxt.body, nxt.doc.signer
    if (b.room, b.owner) != (a.room, a.owner):
        raise RoomError("bad_transition", "the room or its owner changed")
    if b.version != a.version + 1 or b.prev != prev.digest:
        raise RoomError(
            "bad_transition", f"version {b.version} does not follow version {a.version}"
        )
    if not set(a.redeemed) <= set(b.redeemed):
        raise RoomError("bad_transition", "a redeemed nonce was dropped (it could be reused)")
    if signer == a.owner:
        return
    if not a.may_admit(signer):
        raise RoomError("not_authorized", f"{signer} may not publish room {a.room!r}'s manifest")
    _check_admitter_change(a, b, signer)


def _check_admitter_change(a: RoomManifest, b: RoomManifest, signer: str) -> None:
    """An admitter only adds members (no admit right, permissions it holds) and nonces."""
    granted = set(a.member(signer).permissions)  # type: ignore[union-attr]
    old = {m.hotkey: m for m in a.members}
    for m in b.members:
        if m.hotkey in old:
            if m != old[m.hotkey]:
                raise RoomError("not_authorized", f"an admitter changed member {m.hotkey}")
            continue
        if m.admit or not set(m.permissions) <= granted or m.since != b.version:
            raise RoomError("not_authorized", f"an admitter may not grant {m.hotkey} that")
    if not set(old) <= {m.hotkey for m in b.members} or b.runs != a.runs:
        raise RoomError("not_authorized", "an admitter may only add members")


def key_safe(name: str) -> bool:
    """Whether ``name`` may name a room or a run (matched whole: no trailing newline)."""
    return bool(re.fullmatch(NAME.strip("^$"), name))
