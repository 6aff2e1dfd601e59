"""Why a room object was refused: one stable reason code per failure.

Every parse in :mod:`subnet.room` is total: malformed, forged, tampered, expired or replayed input
becomes a :class:`RoomError` with one of these codes, never another exception.
"""

from __future__ import annotations

from ..errors import SetupError

REASONS = (
    "malformed",  # not JSON of the expected schema, or too large
    "wrong_kind",  # a signed document of another kind (an invite passed as a manifest ...)
    "bad_signature",  # the signature does not verify for the named signer: forged or tampered
    "forged",  # validly signed, but by a key that may not sign it (not the owner, not an admitter)
    "wrong_room",  # made for another room
    "expired",  # an invite past its expiry
    "reused",  # an invite nonce that was already redeemed
    "already_member",  # a redemption by a hotkey that is a member already
    "not_member",  # an action by (or on) a hotkey that is not a member
    "not_authorized",  # a manifest version its signer may not publish
    "bad_transition",  # a version that does not follow its predecessor (number, digest, room)
    "rollback",  # a latest pointer older than a version already seen
    "fork",  # two different manifests for the same version
    "pointer_mismatch",  # the latest pointer differs from the write-once version it names
    "not_found",  # no such room, version, invite or redemption
    "unreachable",  # the room's storage did not answer, or refused our credentials
    "conflict",  # a write-once key already holds something else
    "bad_request",  # a request the room cannot satisfy (unknown permission, slot, run ...)
)


class RoomError(SetupError):
    """A room object or request was refused; ``reason`` is a code from ``REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in REASONS, reason
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)
