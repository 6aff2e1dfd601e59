"""`ModelSync`: bring a local state to the holder's latest version (DESIGN §3, step 8).

Two paths, both ending in the same check that the state hashes to the manifest's digest:

- **patches**: a local state at version v applies the patches (or sparse deltas,
  `subnet.versions.delta`) of v+1 .. latest in order (cheap);
- **checkpoint**: load the full checkpoint named by the manifest and apply patches from there.

Why the patch path was left (`last_fallback.reason`): `missing_version` (a patch, delta or
manifest is gone), `digest_mismatch` (a delta rebuilt other bits than the holder's: another
machine's arithmetic, or a bug), `delta:<codec reason>` or `patch:<reason>` (a bad object).

The patch path is tried when a local state is given and it is at most `max_patches` versions
behind. If it meets bad or missing data (a tampered patch, a local state that does not match), the
syncer logs the reason and takes the checkpoint path. If the checkpoint itself is bad or missing it
walks back through the write-once manifests to an older checkpoint, up to `max_checkpoints` tries.
Outages (`storage:*`) are raised at once: retrying on another path would not help. States are
rebuilt into new dicts, so a failure never leaves a half-applied state behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from loguru import logger
from torch import Tensor

from subnet.compression import CompressionConfig
from subnet.compression.patch import PatchError, apply_patch, state_digest
from subnet.storage.base import ObjectStore
from subnet.storage.readers import ReaderPool
from subnet.versions import layout
from subnet.versions.delta import DeltaError, SparseDelta, apply_delta, decode_delta
from subnet.versions.errors import SyncError
from subnet.versions.history import newest_committed, probe_manifest, read_hint
from subnet.versions.manifest import ModelManifest, read_manifest
from subnet.versions.objects import fetch_verified
from subnet.wire import PayloadSpec

_MANIFEST_CACHE = 64  # earlier manifests kept (a few hundred bytes each)

SyncPath = Literal["current", "patches", "checkpoint"]


class ModelSync:
    """Follows one holder's published versions of one run."""

    def __init__(
        self,
        store_or_reader: ObjectStore | ReaderPool,
        holder_hotkey: str,
        run: str,
        *,
        max_bytes: int,
        spec: PayloadSpec | None = None,
        max_patches: int = 32,
        max_checkpoints: int = 2,
        lane: str | None = None,
    ) -> None:
        """
        Args:
            store_or_reader: the holder's bucket, or a `ReaderPool` to look it up in on each call
                (so a changed storage commitment is picked up).
            holder_hotkey: ss58 address every object must be signed by.
            run: the run id in every key and header.
            max_bytes: the largest object (a checkpoint) this syncer will download.
            spec: names, dtypes and shapes a checkpoint must have (e.g. `spec_of(model_state(m))`);
                None checks only the final digest.
            max_patches: the most patches the patch path applies before a checkpoint is cheaper.
            max_checkpoints: how many checkpoints to try, newest first, when one is bad.
            lane: the model's key space (None: the default `model` lane).
        """
        self._source = store_or_reader
        self.holder = holder_hotkey
        self.run = run
        self.max_bytes = max_bytes
        self.lane = lane
        self.spec = spec
        self.max_patches = max_patches
        if max_checkpoints < 1 or max_patches < 0:
            raise ValueError("max_checkpoints must be >= 1 and max_patches >= 0")
        self.max_checkpoints = max_checkpoints
        self.highest_seen = -1  # a holder pointer older than this is a rollback
        self._seen: ModelManifest | None = None  # the manifest of `highest_seen`
        self.last_path: SyncPath | None = None  # how the last `sync` got there, for metrics
        self.last_fallback: SyncError | None = None  # why the last `sync` left the patch path
        self._manifests: dict[int, ModelManifest] = {}  # verified write-once manifests (immutable)

    def latest(self) -> ModelManifest:
        """The holder's newest committed manifest, verified, never older than one already seen.

        The latest pointer is only a hint (`subnet.versions.history`): a forged one is ignored, a
        stale or replayed older one is passed over for the newer write-once manifests. Only when
        the version seen before is gone from the bucket (the holder started over on an empty
        bucket) is it a `rollback`.
        """
        store = self._store()
        hint = read_hint(store, self.run, self.holder, self.lane)
        known = hint
        if self._seen is not None and (hint is None or hint.version < self._seen.version):
            if probe_manifest(store, self.run, self.holder, self._seen.version, self.lane) is None:
                got = "nothing" if hint is None else f"version {hint.version}"
                raise SyncError("rollback", f"latest is {got}, already saw {self.highest_seen}")
            if hint is not None:
                logger.warning(
                    "holder pointer names version {}, but version {} is committed: "
                    "ignoring the stale pointer",
                    hint.version,
                    self._seen.version,
                )
            known = self._seen
        if known is not None and self._seen is not None and known.version > self._seen.version:
            # The pointer moved forward since the last call: signed and written after its
            # manifest, so one request suffices. A pointer that stops moving (the holder crashed
            # before rewriting it, or an old one was replayed) is checked against the manifests.
            manifest: ModelManifest | None = known
        else:
            manifest = newest_committed(store, self.run, self.holder, known, self.lane)
        if manifest is None:
            raise SyncError("not_published", f"no committed manifest of {self.holder}")
        if hint is not None and manifest.version > hint.version:
            logger.info("holder pointer is behind: version {} is committed", manifest.version)
        self._seen, self.highest_seen = manifest, manifest.version
        return manifest

    def sync(
        self, state: Mapping[str, Tensor] | None, version: int | None
    ) -> tuple[dict[str, Tensor], ModelManifest]:
        """Return the state at the latest version and its manifest; raise `SyncError` otherwise.

        `state` is the local state at `version` (both None for a fresh peer). A state already at
        the latest version is checked and returned as is; a synced state lives on the CPU.
        """
        return self.sync_to(self.latest(), state, version)

    def sync_to(
        self,
        latest: ModelManifest,
        state: Mapping[str, Tensor] | None,
        version: int | None,
    ) -> tuple[dict[str, Tensor], ModelManifest]:
        """As `sync`, to the verified manifest `latest` instead of the newest one."""
        self.last_fallback = None
        if state is not None and version is not None:
            if version > latest.version:
                raise SyncError("rollback", f"local version {version} > latest {latest.version}")
            if latest.version - version <= self.max_patches:
                try:
                    synced = self._forward(dict(state), version, latest)
                    self.last_path = "current" if version == latest.version else "patches"
                    return synced, latest
                except SyncError as exc:
                    if exc.reason.startswith("storage:"):
                        raise
                    logger.warning("patch path from version {} failed: {}", version, exc)
                    self.last_fallback = exc
        synced = self._from_checkpoint(latest)
        self.last_path = "checkpoint"
        return synced, latest

    def _from_checkpoint(self, latest: ModelManifest) -> dict[str, Tensor]:
        """Newest checkpoint first; one that is bad or missing sends us to the one before it."""
        base = latest.checkpoint_version
        for attempt in range(1, self.max_checkpoints + 1):
            try:
                state = self._load_checkpoint(base)
            except SyncError as exc:
                last_try = base == 0 or attempt == self.max_checkpoints
                if last_try or exc.reason.startswith("storage:"):
                    raise
                logger.warning("checkpoint {} unusable ({}); trying an older one", base, exc)
                # The manifest just before a checkpoint names the previous checkpoint.
                before = self._manifest(base - 1)
                base = before.checkpoint_version
                continue
            return self._forward(state, base, latest)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _load_checkpoint(self, version: int) -> dict[str, Tensor]:
        envelope = fetch_verified(
            self._store(),
            layout.checkpoint_key(self.run, self.holder, version, self.lane),
            layout.expect_checkpoint(self.run, self.holder, version, self.lane),
            self.spec,
            max_bytes=self.max_bytes,
        )
        return envelope.tensors

    def _forward(
        self, state: dict[str, Tensor], version: int, latest: ModelManifest
    ) -> dict[str, Tensor]:
        """Apply the patch or delta of each version version+1 .. latest, then check the digest.

        Each version's write-once manifest says which of the two it has (one small read per
        version before the latest, whose manifest the caller has verified).
        """
        for v in range(version + 1, latest.version + 1):
            manifest = latest if v == latest.version else self._manifest(v)
            if manifest.delta_codec is not None:
                state = self._apply_delta(state, v, manifest.delta_codec)
            else:
                state = self._apply_patch(state, v)
        digest = state_digest(state).hex()
        if digest != latest.digest:
            raise SyncError(
                "digest_mismatch",
                f"version {latest.version}: got {digest[:12]}, manifest says "
                f"{latest.digest[:12]} (from version {version})",
            )
        return state

    def manifest(self, version: int) -> ModelManifest:
        """The verified write-once manifest of `version` (absent: `missing_version`)."""
        return self._manifest(version)

    def _manifest(self, version: int) -> ModelManifest:
        """The write-once manifest of an earlier version (absent: `missing_version`), read once:
        a committed manifest never changes."""
        if version not in self._manifests:
            if len(self._manifests) >= _MANIFEST_CACHE:
                self._manifests.pop(min(self._manifests))
            self._manifests[version] = read_manifest(
                self._store(), self.run, self.holder, version, self.lane
            )
        return self._manifests[version]

    def _apply_patch(self, state: dict[str, Tensor], v: int) -> dict[str, Tensor]:
        patch = fetch_verified(
            self._store(),
            layout.patch_key(self.run, self.holder, v, self.lane),
            layout.expect_patch(self.run, self.holder, v, self.lane),
            layout.PATCH_SPEC,
            max_bytes=self.max_bytes,
        )
        try:
            return apply_patch(state, patch.tensors)
        except PatchError as exc:
            raise SyncError(f"patch:{exc.reason}", f"version {v}: {exc}") from None
        except (ValueError, TypeError, IndexError, RuntimeError) as exc:
            # A signed patch whose stream is corrupt (the holder's bug or a bad disk): the
            # caller falls back to the checkpoint path instead of failing the window.
            raise SyncError("patch:corrupt", f"version {v}: {exc}") from None

    def _apply_delta(
        self, state: dict[str, Tensor], v: int, codec: CompressionConfig
    ) -> dict[str, Tensor]:
        envelope = fetch_verified(
            self._store(),
            layout.delta_key(self.run, self.holder, v, self.lane),
            layout.expect_delta(self.run, self.holder, v, self.lane),
            None,  # the codec checks every stream below, before anything is decoded
            max_bytes=self.max_bytes,
        )
        shapes = {name: tuple(t.shape) for name, t in state.items()}
        try:
            return apply_delta(state, decode_delta(SparseDelta(codec, envelope.tensors), shapes))
        except DeltaError as exc:
            raise SyncError(f"delta:{exc.reason}", f"version {v}: {exc}") from None

    def _store(self) -> ObjectStore:
        if isinstance(self._source, ReaderPool):
            store = self._source.get(self.holder)
            if store is None:
                raise SyncError("no_reader", f"no valid storage commitment for {self.holder}")
            return store
        return self._source
