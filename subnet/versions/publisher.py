"""`VersionPublisher`: the model holder's side of DESIGN §3 step 7 — publish version v+1.

Each version is written in an order that keeps readers safe at every instant: the patch (v >= 1),
the checkpoint (every `checkpoint_every` versions, version 0 included), the write-once manifest,
and last the latest pointer. A reader that sees the pointer therefore finds everything it names.

A restarted holder resumes from the store: it reads the pointer and rebuilds the latest state
through `ModelSync`, then continues at the next version. Writes of a crashed attempt are kept when
the retry carries the same payload, and refused (`conflict`) when it does not, so no published
object is ever replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loguru import logger
from torch import Tensor

from subnet.compression.patch import encode_patch, state_digest
from subnet.storage.base import ObjectStore
from subnet.versions import layout
from subnet.versions.errors import PublishError, SyncError
from subnet.versions.manifest import ModelManifest, encode_manifest, read_pointer
from subnet.versions.objects import write_once
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
    ) -> None:
        """Nothing is read until `resume` or the first `publish`; `max_bytes` bounds those reads."""
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        self.store = store
        self.signer = signer
        self.run = run
        self.checkpoint_every = checkpoint_every
        self.max_bytes = max_bytes
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

    def publish(self, state: Mapping[str, Tensor], window: int) -> ModelManifest:
        """Publish `state` as the next version, produced by the merge of `window`.

        The first version of a run is the initial model (publish it with `window=-1`). Publishing
        the latest version's state for its own window again returns its manifest unchanged.
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
        manifest = self._write(state, digest, window, previous)
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
        self, state: dict[str, Tensor], digest: str, window: int, previous: _Head | None
    ) -> ModelManifest:
        holder = self.signer.ss58_address
        version = 0 if previous is None else previous.manifest.version + 1
        full = version % self.checkpoint_every == 0
        checkpoint_version = (
            version if full or previous is None else previous.manifest.checkpoint_version
        )
        manifest = ModelManifest(  # validated before anything is written
            version=version,
            window=window,
            digest=digest,
            checkpoint_version=checkpoint_version,
            checkpoint_key=layout.checkpoint_key(self.run, holder, checkpoint_version),
            patch_key=layout.patch_key(self.run, holder, version) if version else None,
        )
        if previous is not None:
            try:
                patch = encode_patch(previous.state, state)
            except ValueError as exc:
                raise PublishError("state_mismatch", str(exc)) from None
            key = layout.patch_key(self.run, holder, version)
            self._write_object(key, layout.expect_patch(self.run, holder, version), patch)
        if full:
            key = layout.checkpoint_key(self.run, holder, version)
            self._write_object(key, layout.expect_checkpoint(self.run, holder, version), state)
        write_once(
            self.store,
            layout.manifest_key(self.run, holder, version),
            encode_manifest(self.signer, self.run, manifest, pointer=False),
            layout.expect_manifest(self.run, holder, version),
            max_bytes=layout.MANIFEST_MAX_BYTES,
        )
        # Last: once the pointer names this version, everything it relies on is in place.
        self.store.put(
            layout.pointer_key(self.run, holder),
            encode_manifest(self.signer, self.run, manifest, pointer=True),
        )
        return manifest

    def _write_object(self, key: str, expected: Expected, tensors: Mapping[str, Tensor]) -> None:
        """Sign `tensors` with the header `expected` describes and write them once under `key`."""
        blob = encode_envelope(
            signer=self.signer,
            run=self.run,
            kind=expected.kind,
            window=expected.window,
            tensors=tensors,
            base_version=expected.base_version,
        )
        write_once(self.store, key, blob, expected, max_bytes=self.max_bytes)

    def resume(self) -> ModelManifest | None:
        """Load what this holder already published (once; `publish` calls it first).

        Returns the latest published manifest, None for a new run. A restarted holder calls it to
        learn whether to publish the initial model or to continue from `latest_state`.
        """
        if self._resumed:
            return self.latest
        holder = self.signer.ss58_address
        try:
            read_pointer(self.store, self.run, holder)
        except SyncError as exc:
            if exc.reason != "not_published":
                raise PublishError(f"resume:{exc.reason}", exc.detail) from None
            self._resumed = True
            return None
        syncer = ModelSync(self.store, holder, self.run, max_bytes=self.max_bytes)
        try:
            state, manifest = syncer.sync(None, None)
        except SyncError as exc:
            raise PublishError(f"resume:{exc.reason}", exc.detail) from None
        self._head, self._resumed = _Head(manifest, state), True
        logger.info("resuming after published model version {}", manifest.version)
        return manifest
