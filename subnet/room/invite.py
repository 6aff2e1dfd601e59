"""Invites, redemptions and leaves: how members come and go without a coordinator.

An **invite** is signed by the owner or an admitting member and names the room, the permissions
and slots granted, an expiry and a random nonce. It travels out of band (a token a person pastes).

A **redemption** is created by the joiner: a document signed by the joiner's hotkey that embeds
the invite and the joiner's read settings, written once (``put_if_absent``) under the invite's
nonce in the room's prefix, so a second joiner with the same invite finds the key taken. The
admitting member verifies it (:func:`check_redemption`: both signatures, the issuer's authority in
the current manifest, expiry against the storage server's clock, the nonce unused) before it
publishes the next manifest, which records the nonce: a reused invite is refused even if the
redemption object were deleted.

A **leave** is signed by the member itself; it takes effect in readers at once and the owner
drops the member at its next manifest.
"""

from __future__ import annotations

import base64
import secrets
import time
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import Field, ValidationError, field_validator

from ..membership.roster import PERMISSIONS
from .errors import RoomError
from .manifest import (
    NAME,
    NONCE,
    SS58,
    MemberName,
    RoomManifest,
    RoomMember,
    SlotName,
    _check_permissions,
)
from .manifest import _Strict as Strict
from .signed import SignedDoc, parse_doc, sign_doc

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch

INVITE, REDEMPTION, LEAVE = "room-invite", "room-redemption", "room-leave"
TOKEN_PREFIX = "beam-invite:"
MAX_TTL_S = 30 * 24 * 3600.0


class Invite(Strict):
    """What an invite grants."""

    room: str = Field(pattern=NAME)
    owner: str = Field(pattern=SS58)
    location: str = Field(max_length=512)  # the room's address (subnet.room.address)
    permissions: list[str] = Field(max_length=len(PERMISSIONS))
    slots: list[SlotName] = Field(default_factory=list, max_length=16)
    expires: float = Field(ge=0)
    nonce: str = Field(pattern=NONCE)
    name: MemberName = ""  # who it is for, as the inviter calls them

    @field_validator("permissions")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return _check_permissions(value)


class Redemption(Strict):
    """A joiner's claim of an invite."""

    room: str = Field(pattern=NAME)
    nonce: str = Field(pattern=NONCE)
    invite: str = Field(max_length=16384)  # the invite document, verbatim
    read: str = Field(max_length=512)  # how members read the joiner's bucket
    name: MemberName = ""  # the joiner's own name (the invite's when empty)


class Leave(Strict):
    """A member's signed departure."""

    room: str = Field(pattern=NAME)
    version: int = Field(ge=0)  # the manifest version it leaves (members since then are gone)


def _body(model: type[Strict], doc: SignedDoc):
    try:
        return model.model_validate(doc.body)
    except (ValidationError, ValueError) as error:
        raise RoomError("malformed", f"{doc.kind}: {str(error).splitlines()[0]}") from None


def make_invite(
    signer: Signer,
    manifest: RoomManifest,
    location: str,
    permissions: list[str],
    slots: list[str],
    ttl_s: float,
    *,
    now: float | None = None,
    name: str = "",
) -> bytes:
    """A signed invite to ``manifest``'s room; RoomError if ``signer`` may not grant it."""
    if not 0 < ttl_s <= MAX_TTL_S:
        raise RoomError("bad_request", f"expiry must be within 30 days, got {ttl_s:.0f} s")
    _check_issuer(manifest, signer.ss58_address, permissions)
    try:
        invite = Invite(
            room=manifest.room,
            owner=manifest.owner,
            location=location,
            permissions=sorted(permissions),
            slots=sorted(slots),
            expires=(time.time() if now is None else now) + ttl_s,
            nonce=secrets.token_hex(16),
            name=name,
        )
    except (ValidationError, ValueError) as error:
        raise RoomError("bad_request", str(error).splitlines()[-1].strip()) from None
    return sign_doc(signer, INVITE, invite.model_dump(mode="json"))


def _check_issuer(manifest: RoomManifest, issuer: str, permissions: list[str]) -> None:
    if not manifest.may_admit(issuer):
        raise RoomError("forged", f"{issuer} is neither the owner nor an admitting member")
    held = set(manifest.member(issuer).permissions)  # type: ignore[union-attr]
    if issuer != manifest.owner and not set(permissions) <= held:
        raise RoomError("forged", f"an admitter may grant only what it holds ({sorted(held)})")


def to_token(invite_doc: bytes) -> str:
    """The invite as one line a person can paste."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(invite_doc).decode()


def from_token(token: str) -> bytes:
    """The invite document in ``token``; RoomError("malformed") if it is not one."""
    text = token.strip()
    if not text.startswith(TOKEN_PREFIX) or len(text) > 32768:
        raise RoomError("malformed", f"an invite token starts with {TOKEN_PREFIX!r}")
    try:
        return base64.b64decode(text[len(TOKEN_PREFIX) :].encode(), altchars=b"-_", validate=True)
    except ValueError:  # binascii.Error is a ValueError
        raise RoomError("malformed", "the invite token is not valid base64") from None


def parse_invite(raw: bytes) -> tuple[SignedDoc, Invite]:
    """Signature and schema of an invite (authority and expiry: :func:`check_invite`)."""
    doc = parse_doc(raw, INVITE)
    return doc, _body(Invite, doc)


def check_invite(raw: bytes, manifest: RoomManifest, at: float) -> tuple[SignedDoc, Invite]:
    """A valid invite for ``manifest``'s room at time ``at``, or RoomError with the reason."""
    doc, invite = parse_invite(raw)
    if invite.room != manifest.room or invite.owner != manifest.owner:
        raise RoomError("wrong_room", f"invite to room {invite.room!r} of {invite.owner}")
    _check_issuer(manifest, doc.signer, list(invite.permissions))
    if at > invite.expires:
        raise RoomError("expired", f"invite expired {at - invite.expires:.0f} s before use")
    if invite.nonce in manifest.redeemed:
        raise RoomError("reused", f"invite {invite.nonce[:8]} was redeemed already")
    return doc, invite


def make_redemption(signer: Signer, invite_raw: bytes, read: str, name: str = "") -> bytes:
    """The joiner's signed claim of ``invite_raw``, with how members read its bucket and the
    name it goes by (the invite's when empty)."""
    _, invite = parse_invite(invite_raw)
    try:
        body = Redemption(
            room=invite.room, nonce=invite.nonce, invite=invite_raw.decode(), read=read, name=name
        )
    except ValidationError as error:
        raise RoomError("bad_request", str(error).splitlines()[-1].strip()) from None
    return sign_doc(signer, REDEMPTION, body.model_dump(mode="json"))


def check_redemption(
    raw: bytes, manifest: RoomManifest, written: datetime | float
) -> tuple[RoomMember, str]:
    """The member a redemption admits and the invite nonce it uses, or RoomError with the reason.

    ``written`` is when the storage server says the redemption was written: the invite must
    not have expired by then (the joiner's own clock is not trusted).
    """
    doc = parse_doc(raw, REDEMPTION)
    claim: Redemption = _body(Redemption, doc)
    at = written.timestamp() if isinstance(written, datetime) else float(written)
    _, invite = check_invite(claim.invite.encode(), manifest, at)
    if (claim.room, claim.nonce) != (invite.room, invite.nonce):
        raise RoomError("wrong_room", "the redemption names another room or invite")
    if manifest.member(doc.signer) is not None:
        raise RoomError("already_member", f"{doc.signer} is a member already")
    try:
        member = RoomMember(
            hotkey=doc.signer,
            read=claim.read,
            permissions=list(invite.permissions),
            slots=list(invite.slots),
            since=manifest.version + 1,
            name=claim.name or invite.name,
        )
    except ValidationError as error:
        raise RoomError("malformed", str(error).splitlines()[-1].strip()) from None
    return member, invite.nonce


def make_leave(signer: Signer, manifest: RoomManifest) -> bytes:
    """A member's signed departure from ``manifest``'s room."""
    if manifest.member(signer.ss58_address) is None:
        raise RoomError("not_member", f"{signer.ss58_address} is not a member of {manifest.room}")
    body = Leave(room=manifest.room, version=manifest.version)
    return sign_doc(signer, LEAVE, body.model_dump(mode="json"))


def check_leave(raw: bytes, manifest: RoomManifest, hotkey: str) -> Leave:
    """A valid leave of ``hotkey`` from ``manifest``'s room, or RoomError."""
    doc = parse_doc(raw, LEAVE)
    leave: Leave = _body(Leave, doc)
    if doc.signer != hotkey:
        raise RoomError("forged", f"a leave of {hotkey} signed by {doc.signer}")
    if leave.room != manifest.room:
        raise RoomError("wrong_room", f"a leave of room {leave.room!r}")
    return leave
