"""`VersionPublisher`: the model holder's side of DESIGN §3 step 7 — publish version v+1.

Each version is written in an order that keeps readers safe at every instant: the delta or patch
(v >= 1), the checkpoint (every `checkpoint_every` versions, version 0 included), the write-once
manifest, and last the latest pointer. A reader that sees the pointer therefore finds everything it names.

**The write-once manifest is the commit point** (docs/reliability.md). Before it exists nothing
names version v, so a delta, patch or checkpoint of v left by a crashed attempt is an orphan that no
reader has used: the next attempt overwrites it, whatever merge it now publishes. Once the
manifest exists the version is fixed for good (`If-None-Match: *`), so two different models are
never published under one version; a manifest key holding a valid object with another payload is
a `conflict` (a second holder on the same bucket).

A restarted holder resumes from the newest *committed* manifest (`subnet.versions.history`): the
pointer is only a hint, so a crash between manifest and pointer, a replayed older pointer or a
forged one cost nothing. It rebuilds that version's state (from its own local copy when the digest
matches, else through `ModelSync`), repairs the pointer, and continues at the next version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loguru import logger
from torch import Tensor

from subnet.compression.patch import encode_patch, state_digest
from subnet.storage.base import ObjectStore
from subnet.versions import layout
from subnet.versions.delta import DeltaError, SparseDelta, apply_delta, decode_delta
from subnet.versions.errors import PublishError, SyncError
from subnet.versions.history import newest_committed, probe_manifest, read_hint
from subnet.versions.manifest import ModelManifest, encode_manifest
from subnet.versions.objects import commit_once
from subnet.versions.state import snapshot
from subnet.versions.sync import ModelSync
from subnet.wire import Expected, Signer, encode_envelope

DEFAULT_MAX_BYTES = 4 << 30  # reading back our own checkpoint on resume


@dataclass(frozen=True)
class _Head:
    """The newest published version and its state (CPU tensors), kept to encode the next patch."""

    manifest: ModelManifest
    state: dict[str, Tensor]


class VersionPublisher:
    """Publishes one run's model versions as patches, checkpoints and signed manifests."""

    def __init__(
        self,
        store: ObjectStore,
        signer: Signer,
        run: str,
        *,
        checkpoint_every: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        lane: str | None = None,
    ) -> None:
        """Nothing is read until `resume` or the first `publish`; `max_bytes` bounds those reads.

        `lane` names the model's key space (None: the default `model` lane).
        """
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        self.store = store
        self.signer = signer
        self.run = run
        self.checkpoint_every = checkpoint_every
        self.max_bytes = max_bytes
        self.lane = lane
        self._head: _Head | None = None
        self._resumed = False

    @property
    def latest(self) -> ModelManifest | None:
        """The newest version this publisher knows of (after the first `publish`)."""
        return self._head.manifest if self._head else None

    @property
    def latest_state(self) -> dict[str, Tensor] | None:
        """A copy of the newest version's state (CPU tensors), e.g. to restart training from it."""
        return snapshot(self._head.state) if self._head else None

    def publish(
        self,
        state: Mapping[str, Tensor],
        window: int,
        delta: SparseDelta | None = None,
        equivocations: Mapping[str, str] | None = None,
    ) -> ModelManifest:
        """Publish `state` as the next version, produced by the merge of `window`.

        The first version of a run is the initial model (publish it with `window=-1`). Publishing
        the latest version's state for its own window again returns its manifest unchanged.
        `delta` (from `Resparsifier.reduce`) is published instead of a patch when it turns the
        latest version into `state` bit for bit; one that does not is logged and replaced by a
        patch, so a peer never gets a delta the holder did not check. `equivocations` (hotkey ->
        hex seal) goes into the manifest as is (`ModelManifest`).
        """
        self.resume()
        state = snapshot(state)
        digest = state_digest(state).hex()
        previous = self._head
        if previous is not None:
            last = previous.manifest
            if window == last.window and digest == last.digest:
                logger.info("version {} is already published for window {}", last.version, window)
                return last
            if window <= last.window:
                raise PublishError(
                    "window_not_after_latest", f"window {window}, latest is {last.window}"
                )
        manifest = self._write(state, digest, window, previous, delta, dict(equivocations or {}))
        self._head = _Head(manifest, state)
        logger.info(
            "published model version {} (window {}, digest {}, checkpoint {})",
            manifest.version,
            window,
            digest[:12],
            manifest.checkpoint_version,
        )
        return manifest

    def _write(
        self,
        state: dict[str, Tensor],
        digest: str,
        window: int,
        previous: _Head | None,
        delta: SparseDelta | None,
        equivocations: dict[str, str],
    ) -> ModelManifest:
        holder = self.signer.ss58_address
        version = 0 if previous is None else previous.manifest.version + 1
        full = version % self.checkpoint_every == 0
        checkpoint_version = (
            version if full or previous is None else previous.manifest.checkpoint_version
        )
        if previous is None or (delta is not None and not _reproduces(previous, delta, digest)):
            delta = None
        manifest = ModelManifest(  # validated before anything is written
            version=version,
            window=window,
            digest=digest,
            checkpoint_version=checkpoint_version,
            checkpoint_key=layout.checkpoint_key(self.run, holder, checkpoint_version, self.lane),
            patch_key=layout.patch_key(self.run, holder, version, self.lane)
            if version and not delta
            else None,
            delta_key=layout.delta_key(self.run, holder, version, self.lane) if delta else None,
            delta_codec=delta.codec if delta else None,
            equivocations=equivocations,
        )
        committed = probe_manifest(self.store, self.run, holder, version, self.lane)
        if committed is not None:
            if (committed.digest, committed.window) == (digest, window):
                # Our own earlier attempt got as far as the manifest (then the pointer failed).
                logger.info(
                    "version {} is already committed for window {}; finishing it", version, window
                )
                self._write_pointer(committed)
                return committed
            # Committed with another model: never write under a committed version.
            raise PublishError("conflict", f"version {version} is already committed")
        self._write_objects(state, version, previous, delta, full)
        commit_once(
            self.store,
            layout.manifest_key(self.run, holder, version, self.lane),
            encode_manifest(self.signer, self.run, manifest, pointer=False, lane=self.lane),
            layout.expect_manifest(self.run, holder, version, self.lane),
            max_bytes=layout.MANIFEST_MAX_BYTES,
        )
        # Last: once the pointer names this version, everything it relies on is in place.
        self._write_pointer(manifest)
        return manifest

    def _write_objects(
        self,
        state: dict[str, Tensor],
        version: int,
        previous: _Head | None,
        delta: SparseDelta | None,
        full: bool,
    ) -> None:
        """Write what the manifest will point at: the delta, else the patch from the previous
        version, and the full checkpoint when ``full``."""
        holder = self.signer.ss58_address
        if delta is not None:
            key = layout.delta_key(self.run, holder, version, self.lane)
            expected = layout.expect_delta(self.run, holder, version, self.lane)
            self._write_orphan(key, expected, delta.payload)
        elif previous is not None:
            try:
                patch = encode_patch(previous.state, state)
            except ValueError as exc:
                raise PublishError("state_mismatch", str(exc)) from None
            key = layout.patch_key(self.run, holder, version, self.lane)
            self._write_orphan(
                key, layout.expect_patch(self.run, holder, version, self.lane), patch
            )
        if full:
            key = layout.checkpoint_key(self.run, holder, version, self.lane)
            expected = layout.expect_checkpoint(self.run, holder, version, self.lane)
            self._write_orphan(key, expected, state)

    def _write_pointer(self, manifest: ModelManifest) -> None:
        self.store.put(
            layout.pointer_key(self.run, self.signer.ss58_address, self.lane),
            encode_manifest(self.signer, self.run, manifest, pointer=True, lane=self.lane),
        )

    def _write_orphan(self, key: str, expected: Expected, tensors: Mapping[str, Tensor]) -> None:
        """Sign `tensors` as `expected` describes and write them, replacing an earlier attempt.

        Only called before the version's manifest exists, when no reader can rely on the key.
        """
        blob = encode_envelope(
            signer=self.signer,
            run=self.run,
            kind=expected.kind,
            window=expected.window,
            tensors=tensors,
            base_version=expected.base_version,
            lane=expected.lane,
        )
        self.store.put(key, blob)

    def resume(self, local: tuple[int, Mapping[str, Tensor]] | None = None) -> ModelManifest | None:
        """Load what this holder already published (once; `publish` calls it first).

        `local` is the holder's own copy `(version, state)`, used instead of a download when its
        digest matches the committed version. Returns the latest committed manifest, None for a
        new run. A restarted holder calls it to learn whether to publish the initial model or to
        continue from `latest_state`.
        """
        if self._resumed:
            return self.latest
        holder = self.signer.ss58_address
        try:
            hint = read_hint(self.store, self.run, holder, self.lane)
            manifest = newest_committed(self.store, self.run, holder, hint, self.lane)
        except SyncError as exc:
            raise PublishError(f"resume:{exc.reason}", exc.detail) from None
        if manifest is None:
            self._resumed = True
            return None
        state = self._state_of(manifest, local)
        if hint is None or hint.version != manifest.version:
            logger.warning(
                "latest pointer {} version {}; repairing it",
                "missing or invalid, committed"
                if hint is None
                else f"names version {hint.version}, committed",
                manifest.version,
            )
            self._write_pointer(manifest)
        self._head, self._resumed = _Head(manifest, state), True
        logger.info("resuming after published model version {}", manifest.version)
        return manifest

    def _state_of(
        self, manifest: ModelManifest, local: tuple[int, Mapping[str, Tensor]] | None
    ) -> dict[str, Tensor]:
        """The committed version's state: our own copy if it hashes right, else synced."""
        if local is not None and local[0] == manifest.version:
            state = snapshot(local[1])
            if state_digest(state).hex() == manifest.digest:
                return state
        syncer = ModelSync(
            self.store, self.signer.ss58_address, self.run, max_bytes=self.max_bytes, lane=self.lane
        )
        try:
            state, _ = syncer.sync_to(manifest, *(local or (None, None)))
        except SyncError as exc:
            raise PublishError(f"resume:{exc.reason}", exc.detail) from None
        return state


def _reproduces(previous: _Head, delta: SparseDelta, digest: str) -> bool:
    """Whether `delta` applied to the previous version gives the state hashing to `digest`."""
    shapes = {name: tuple(t.shape) for name, t in previous.state.items()}
    try:
        rebuilt = apply_delta(previous.state, decode_delta(delta, shapes))
    except DeltaError as exc:
        logger.warning("the merge's delta does not decode ({}); publishing a patch", exc)
        return False
    if state_digest(rebuilt).hex() != digest:
        logger.warning(
            "the merge's delta does not rebuild the state against version {}; publishing a patch",
            previous.manifest.version,
        )
        return False
    return True
