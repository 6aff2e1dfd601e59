"""Which model version is really the newest: the write-once manifests decide, not the pointer.

A version is **committed** once its write-once manifest exists (the holder writes it with
`If-None-Match: *` after the patch and checkpoint it names). The latest pointer is only a hint
written after the commit: a crash can leave it one version behind, an attacker with write access
to the bucket can replay an older signed pointer or plant an unsigned one. So readers and the
holder itself take the pointer as a starting point and check the manifests after it.

Committed manifests are contiguous (version v is only written after v-1 is committed), so the
newest one is found by galloping forward from a known version (1, 2, 4, ... ahead) and then
bisecting: one request when the pointer is current, O(log n) otherwise. No `list` permission
is needed, so it works on anonymous public-read buckets.
"""

from __future__ import annotations

from loguru import logger

from subnet.storage.base import ObjectStore
from subnet.versions.errors import SyncError
from subnet.versions.manifest import ModelManifest, read_manifest, read_pointer

MAX_VERSION = 10**12 - 1  # the key layout's window slot holds 12 digits


def probe_manifest(
    store: ObjectStore, run: str, holder: str, version: int, lane: str | None = None
) -> ModelManifest | None:
    """The committed manifest of `version`, or None when absent or not a valid holder object.

    A forged or corrupt object under a manifest key is treated as absent: nobody can accept it,
    so it commits nothing. Outages (`storage:*`) are raised: absence cannot be told from them.
    """
    if version < 0 or version > MAX_VERSION:
        return None
    try:
        return read_manifest(store, run, holder, version, lane)
    except SyncError as exc:
        if exc.reason == "missing_version":
            return None
        if exc.reason.startswith("rejected:") or exc.reason == "bad_manifest":
            logger.warning("ignoring an invalid manifest for version {}: {}", version, exc)
            return None
        raise


def read_hint(
    store: ObjectStore, run: str, holder: str, lane: str | None = None
) -> ModelManifest | None:
    """The latest pointer when it is present and valid; None (logged) when forged or corrupt."""
    try:
        return read_pointer(store, run, holder, lane)
    except SyncError as exc:
        if exc.reason == "not_published":
            return None
        if exc.reason.startswith("rejected:") or exc.reason == "bad_manifest":
            logger.warning("ignoring an invalid latest pointer of {}: {}", holder[:8], exc)
            return None
        raise


def newest_committed(
    store: ObjectStore,
    run: str,
    holder: str,
    known: ModelManifest | None,
    lane: str | None = None,
) -> ModelManifest | None:
    """The newest committed manifest at or after `known` (None: search from version 0).

    Returns None only when not even version 0 is committed (nothing published).
    """
    low, low_v = known, (known.version if known is not None else -1)
    step, high_v = 1, None
    while high_v is None:  # gallop: low_v is committed (or -1), look further ahead
        found = probe_manifest(store, run, holder, low_v + step, lane)
        if found is None:
            high_v = low_v + step
        else:
            low, low_v, step = found, low_v + step, step * 2
    while high_v - low_v > 1:  # bisect: low_v committed, high_v not
        mid = (low_v + high_v) // 2
        found = probe_manifest(store, run, holder, mid, lane)
        if found is None:
            high_v = mid
        else:
            low, low_v = found, mid
    return low
