"""Where a room lives: write-once manifest versions, the latest pointer, redemptions and leaves.

Keys, under the room's bucket (the address names it, see :mod:`subnet.room.address`)::

    rooms/<room>/manifest/<version:08d>.json   write-once, one per version
    rooms/<room>/manifest/latest.json          the newest version, overwritten each time
    rooms/<room>/redemptions/<nonce>.json      write-once, created by the joiner
    rooms/<room>/leaves/<hotkey>.json          a member's signed leave

Readers never trust the pointer alone: it must equal the write-once object of its version, and
every version from the last one verified (or from version 0) up to it is checked in turn
(signature, schema, authority, predecessor digest). A pointer older than what a reader holds is
a rollback and is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from ..storage.base import ObjectNotFound, ObjectStore
from .errors import RoomError
from .manifest import (
    Manifest,
    RoomManifest,
    check_genesis,
    check_transition,
    encode_manifest,
    parse_manifest,
)
from .signed import MAX_DOC_BYTES

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch


def room_prefix(room: str) -> str:
    """The key prefix of ``room``."""
    return f"rooms/{room}/"


class RoomStore:
    """One room's objects in an :class:`~subnet.storage.base.ObjectStore`."""

    def __init__(self, store: ObjectStore, room: str) -> None:
        self.store, self.room = store, room
        self.prefix = room_prefix(room)

    def version_key(self, version: int) -> str:
        """Key of the write-once manifest of ``version``."""
        return f"{self.prefix}manifest/{version:08d}.json"

    @property
    def pointer_key(self) -> str:
        """Key of the latest pointer."""
        return f"{self.prefix}manifest/latest.json"

    def _get(self, key: str) -> bytes:
        try:
            return self.store.get(key, MAX_DOC_BYTES)
        except ObjectNotFound:
            raise RoomError("not_found", f"{key} does not exist") from None

    # Manifests --------------------------------------------------------------------------------

    def read_version(self, version: int) -> Manifest:
        """The write-once manifest of ``version`` (signature and schema checked)."""
        m = parse_manifest(self._get(self.version_key(version)))
        if m.version != version or m.body.room != self.room:
            raise RoomError("bad_transition", f"{self.version_key(version)} holds another version")
        return m

    def latest(self, known: Manifest | None = None, owner: str | None = None) -> Manifest:
        """The newest manifest, verified from ``known`` (or from version 0) up to the pointer."""
        try:
            raw = self._get(self.pointer_key)
        except RoomError:
            raise RoomError(
                "not_found",
                f"no room {self.room!r} here (nothing at {self.pointer_key}); "
                "check the room address",
            ) from None
        head = parse_manifest(raw)
        if known is not None:
            if head.version < known.version:
                raise RoomError(
                    "rollback",
                    f"pointer names version {head.version}, version {known.version} was seen",
                )
            if head.version == known.version:
                if head.digest != known.digest:
                    raise RoomError("fork", f"two different manifests of version {head.version}")
                return known
        current = known
        if current is None:
            current = self.read_version(0)
            check_genesis(current, self.room, owner)
        for version in range(current.version + 1, head.version + 1):
            nxt = self.read_version(version)
            check_transition(current, nxt)
            current = nxt
        if current.digest != head.digest:
            raise RoomError("pointer_mismatch", f"pointer differs from version {head.version}")
        return current

    def create(self, signer: Signer, body: RoomManifest) -> Manifest:
        """Publish version 0; RoomError("conflict") if the room exists already."""
        m = parse_manifest(encode_manifest(signer, body))
        check_genesis(m, self.room)
        if not self.store.put_if_absent(self.version_key(0), m.doc.raw):
            raise RoomError(
                "conflict", f"room {self.room!r} exists already at {self.store.location}"
            )
        self.store.put(self.pointer_key, m.doc.raw)
        return m

    def publish(self, signer: Signer, prev: Manifest, body: RoomManifest) -> Manifest:
        """Publish the version after ``prev`` (checked as every reader will check it)."""
        nxt = parse_manifest(encode_manifest(signer, body))
        check_transition(prev, nxt)
        if not self.store.put_if_absent(self.version_key(nxt.version), nxt.doc.raw):
            raise RoomError("conflict", f"version {nxt.version} was published meanwhile; retry")
        self.store.put(self.pointer_key, nxt.doc.raw)
        return nxt

    # Redemptions and leaves -------------------------------------------------------------------

    def redemption_key(self, nonce: str) -> str:
        """Key of the redemption of invite ``nonce``."""
        return f"{self.prefix}redemptions/{nonce}.json"

    def redeem(self, nonce: str, raw: bytes) -> None:
        """Write a redemption once; RoomError("reused") if the invite was claimed already."""
        if not self.store.put_if_absent(self.redemption_key(nonce), raw):
            raise RoomError("reused", f"invite {nonce[:8]} was redeemed already")

    def redemptions(self) -> Iterator[tuple[str, bytes, datetime]]:
        """Every redemption: ``(key, bytes, when the server wrote it)``."""
        yield from self._docs(f"{self.prefix}redemptions/")

    def leave_key(self, hotkey: str) -> str:
        """Key of ``hotkey``'s leave."""
        return f"{self.prefix}leaves/{hotkey}.json"

    def leaves(self) -> Iterator[tuple[str, bytes, datetime]]:
        """Every leave: ``(key, bytes, when the server wrote it)``."""
        yield from self._docs(f"{self.prefix}leaves/")

    def _docs(self, prefix: str) -> Iterator[tuple[str, bytes, datetime]]:
        for info in self.store.list(prefix):
            if info.size > MAX_DOC_BYTES:
                continue  # never read an oversized object a member planted
            try:
                yield info.key, self.store.get(info.key, MAX_DOC_BYTES), info.last_modified
            except ObjectNotFound:
                continue
