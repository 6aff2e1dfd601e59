"""Reading and writing the holder's envelopes, with every failure turned into a reason code.

Readers get `SyncError`s (`missing_version`, `rejected:<wire reason>`, `storage:<reason>`); the
writer gets write-once semantics for manifests (the commit point of a version) that tolerate its
own earlier attempts. sr25519 signatures are randomized, so a retried write never has the same
bytes as the first attempt: an existing object counts as "already written" when it verifies and
carries the same signed payload digest.
"""

from __future__ import annotations

from loguru import logger

from subnet.storage.base import ObjectNotFound, ObjectStore, ObjectTooLarge, StorageError
from subnet.versions.errors import PublishError, SyncError
from subnet.wire import Envelope, Expected, PayloadSpec, Rejected, verify_envelope


def fetch_verified(
    store: ObjectStore, key: str, expected: Expected, spec: PayloadSpec | None, *, max_bytes: int
) -> Envelope:
    """Read `key` and verify it as `expected`; raise `SyncError` on absence, rejection or outage."""
    try:
        blob = store.get(key, max_bytes)
    except ObjectNotFound:
        raise SyncError("missing_version", key) from None
    except ObjectTooLarge as exc:
        raise SyncError("rejected:too_large", f"{key}: {exc.detail}") from None
    except StorageError as exc:
        raise SyncError(f"storage:{exc.reason}", str(exc)) from None
    try:
        return verify_envelope(blob, expected, spec, max_bytes=max_bytes)
    except Rejected as exc:
        raise SyncError(f"rejected:{exc.reason.value}", f"{key}: {exc.detail}") from None


def commit_once(
    store: ObjectStore, key: str, blob: bytes, expected: Expected, *, max_bytes: int
) -> bool:
    """Write the write-once `blob` (a manifest: the commit point of a version) under `key`.

    True if written now, False if the key already holds the same signed payload (an earlier
    attempt of ours). An object there that is not a valid envelope as `expected` (forged,
    corrupt, not signed by us) commits nothing, since no reader accepts it, and is replaced.
    Raises `PublishError("conflict")` when the key holds a valid object with another payload.
    """
    if store.put_if_absent(key, blob):
        return True
    ours = verify_envelope(blob, expected, None, max_bytes=len(blob)).header
    try:
        theirs = verify_envelope(store.get(key, max_bytes), expected, None, max_bytes=max_bytes)
    except ObjectNotFound:  # deleted since: try once more
        if store.put_if_absent(key, blob):
            return True
        raise PublishError("conflict", f"{key} was taken twice while writing") from None
    except (Rejected, ObjectTooLarge) as exc:
        logger.warning("{} holds an invalid object ({}); replacing it", key, exc)
        store.put(key, blob)
        return True
    if theirs.header.payload_sha256 != ours.payload_sha256:
        raise PublishError("conflict", f"{key} already holds a different payload")
    logger.info("{} already holds this payload (an earlier attempt); keeping it", key)
    return False
