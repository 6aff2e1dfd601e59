"""`ModelManifest`: the signed record that names a model version, its hash and where to get it.

A manifest travels as a `model-manifest` envelope with no tensors; its JSON is the payload's
`manifest` metadata entry (``subnet.wire.ManifestMeta``), so the envelope signature covers it. See `subnet.versions.layout` for
the two keys it is written under.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from subnet.compression import CompressionConfig
from subnet.storage.base import ObjectStore
from subnet.storage.keys import ObjectKind
from subnet.versions import layout
from subnet.versions.errors import SyncError
from subnet.versions.objects import fetch_verified
from subnet.wire import Envelope, ManifestMeta, Signer, encode_envelope
from subnet.wire.envelope import SEAL_BYTES

_MAX_SLOT = 10**12 - 1  # the key layout's 12-digit window slot
MAX_EQUIVOCATIONS = 32  # per version; more senders caught at once are named by the next ones
# A hex seal; every valid envelope's seal fits SEAL_BYTES (about 520 bytes in practice)
_SEAL = re.compile(rf"(?:[0-9a-f]{{2}}){{1,{SEAL_BYTES}}}")
_HOTKEY = re.compile(r"[1-9A-HJ-NP-Za-km-z]{40,60}")  # base58, as in the key layout
_MAX_KEY = 512  # an object key of the layout is under 200 characters


class ModelManifest(BaseModel):
    """One published model version.

    `digest` is the hex `state_digest` of the full state dict; `checkpoint_version` is the newest
    version <= `version` with a full checkpoint. Every version but 0 names how to get it from the
    version before: a lossless `patch_key`, or a sparse `delta_key` with the `delta_codec` that
    decodes it (`subnet.versions.delta`); version 0 names neither.

    `equivocations` names the senders the holder caught signing two payloads for a window since
    its last version: hotkey -> the hex seal (`subnet.wire.verify_seal`) of the payload it read,
    which names its window; a validator holding the sender's seal of another payload checks it
    for itself (`subnet.neuron.equivocation`). Omitted from the JSON when empty.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    version: int = Field(ge=0, le=_MAX_SLOT)
    window: int = Field(ge=-1, le=_MAX_SLOT)  # the window whose merge produced it; -1: initial
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    checkpoint_version: int = Field(ge=0)
    checkpoint_key: str = Field(max_length=_MAX_KEY)
    patch_key: str | None = Field(max_length=_MAX_KEY)
    delta_key: str | None = Field(default=None, max_length=_MAX_KEY)
    delta_codec: CompressionConfig | None = None
    equivocations: dict[str, str] = Field(default_factory=dict, max_length=MAX_EQUIVOCATIONS)

    @model_validator(mode="after")
    def _check_versions(self) -> ModelManifest:
        if self.checkpoint_version > self.version:
            raise ValueError("checkpoint_version is newer than version")
        links = (self.patch_key is not None) + (self.delta_key is not None)
        if links != (self.version != 0):
            raise ValueError("every version but 0 has one patch or delta, and version 0 none")
        if (self.delta_key is None) != (self.delta_codec is None):
            raise ValueError("a delta names its codec, and only a delta does")
        if len(self.equivocations) > MAX_EQUIVOCATIONS:
            raise ValueError(f"more than {MAX_EQUIVOCATIONS} equivocations")
        for hotkey, seal in self.equivocations.items():
            if not (_HOTKEY.fullmatch(hotkey) and _SEAL.fullmatch(seal)):
                raise ValueError("an equivocation is an ss58 hotkey and a hex seal")
        codec = self.delta_codec
        if codec is not None and (not math.isfinite(codec.ef_decay) or codec.topk > codec.chunk**2):
            raise ValueError("a delta codec keeps at most chunk * chunk values per chunk")
        return self


def encode_manifest(
    signer: Signer, run: str, manifest: ModelManifest, *, pointer: bool, lane: str | None = None
) -> bytes:
    """Sign `manifest` for its write-once key, or for the latest pointer when `pointer`."""
    return encode_envelope(
        signer=signer,
        run=run,
        lane=lane,
        kind=ObjectKind.MODEL_MANIFEST,
        window=layout.POINTER_WINDOW if pointer else manifest.version,
        tensors={},
        base_version=manifest.version,
        metadata=ManifestMeta(manifest=_json(manifest)).wire(),
    )


def _json(manifest: ModelManifest) -> str:
    """The manifest's JSON, without ``equivocations`` when there are none."""
    return manifest.model_dump_json(exclude=None if manifest.equivocations else {"equivocations"})


def read_pointer(
    store: ObjectStore, run: str, holder: str, lane: str | None = None
) -> ModelManifest:
    """The holder's latest manifest, verified; `SyncError("not_published")` when there is none."""
    key = layout.pointer_key(run, holder, lane)
    try:
        envelope = fetch_verified(
            store,
            key,
            layout.expect_pointer(run, holder, lane),
            {},
            max_bytes=layout.MANIFEST_MAX_BYTES,
        )
    except SyncError as exc:
        if exc.reason == "missing_version":
            raise SyncError("not_published", f"no manifest at {key}") from None
        raise
    return _manifest_of(envelope, run, holder, lane)


def read_manifest(
    store: ObjectStore, run: str, holder: str, version: int, lane: str | None = None
) -> ModelManifest:
    """The write-once manifest of `version`, verified."""
    envelope = fetch_verified(
        store,
        layout.manifest_key(run, holder, version, lane),
        layout.expect_manifest(run, holder, version, lane),
        {},
        max_bytes=layout.MANIFEST_MAX_BYTES,
    )
    return _manifest_of(envelope, run, holder, lane)


def _manifest_of(envelope: Envelope, run: str, holder: str, lane: str | None) -> ModelManifest:
    """Parse the signed JSON and check it agrees with the header and the key layout."""
    try:
        text = envelope.message(ManifestMeta).manifest  # bounded text: the envelope's schema
        manifest = ModelManifest.model_validate_json(text)
    except ValidationError as exc:  # pydantic's parser also bounds nesting depth
        raise SyncError("bad_manifest", str(exc.errors()[0]["msg"])[:200]) from None
    v = manifest.version
    if envelope.header.base_version != v:
        raise SyncError("bad_manifest", f"header names version {envelope.header.base_version}")
    want_patch = layout.patch_key(run, holder, v, lane) if v and not manifest.delta_key else None
    want_delta = layout.delta_key(run, holder, v, lane) if v and not manifest.patch_key else None
    want_checkpoint = layout.checkpoint_key(run, holder, manifest.checkpoint_version, lane)
    if (manifest.patch_key, manifest.delta_key, manifest.checkpoint_key) != (
        want_patch,
        want_delta,
        want_checkpoint,
    ):
        raise SyncError("bad_manifest", f"version {v} names keys outside the layout")
    return manifest
