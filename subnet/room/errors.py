"""Why a room object was refused: one stable reason code per failure.

Every parse in :mod:`subnet.room` is total: malformed, forged, tampered, expired or replayed input
becomes a :class:`RoomError` with one of these codes (members of the one
``subnet.wire.Reason``), never another exception.
"""

from __future__ import annotations

from ..errors import SetupError
from ..wire.reasons import Reason

REASONS = (
    Reason.MALFORMED,  # not JSON of the expected schema, or too large
    Reason.WRONG_KIND,  # a signed document of another kind (an invite passed as a manifest ...)
    Reason.BAD_SIGNATURE,  # the signature does not verify for the named signer: forged or tampered
    Reason.FORGED,  # validly signed, but by a key that may not sign it (not the owner, an admitter)
    Reason.WRONG_ROOM,  # made for another room
    Reason.EXPIRED,  # an invite past its expiry
    Reason.REUSED,  # an invite nonce that was already redeemed
    Reason.ALREADY_MEMBER,  # a redemption by a hotkey that is a member already
    Reason.NOT_MEMBER,  # an action by (or on) a hotkey that is not a member
    Reason.NOT_AUTHORIZED,  # a manifest version its signer may not publish
    Reason.BAD_TRANSITION,  # a version that does not follow its predecessor (number, digest, room)
    Reason.ROLLBACK,  # a latest pointer older than a version already seen
    Reason.FORK,  # two different manifests for the same version
    Reason.POINTER_MISMATCH,  # the latest pointer differs from the write-once version it names
    Reason.NOT_FOUND,  # no such room, version, invite or redemption
    Reason.UNREACHABLE,  # the room's storage did not answer, or refused our credentials
    Reason.CONFLICT,  # a write-once key already holds something else
    Reason.BAD_REQUEST,  # a request the room cannot satisfy (unknown permission, slot, run ...)
)


class RoomError(SetupError):
    """A room object or request was refused; ``reason`` is a code from ``REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in REASONS, reason
        self.reason = Reason(reason)
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)
