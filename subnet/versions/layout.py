"""Where a model version's objects live, and the payload specs a reader checks them against.

All objects sit in the holder's bucket under `subnet.storage.keys`; the key's window slot carries
the model *version* (not the training window that produced it), so versions list in order:

- `object_key(run, "checkpoint", v, holder)`: the full state of version v (every
  `checkpoint_every` versions, version 0 included).
- `object_key(run, "model-patch", v, holder)`: version v as a lossless patch against v-1 (v >= 1).
- `object_key(run, "model-delta", v, holder)`: or version v as v-1 minus a sparse update
  (`subnet.versions.delta`); a manifest names one of the two.
- `object_key(run, "model-manifest", v, holder)`: the manifest of version v (write-once).
- `latest_key(run, "model-manifest", holder)`: the newest manifest (overwritten each version).

Every function takes the model's `lane` (None: the default `model` lane). A holder of a plan
whose model lane has another name (`@beam/two-models`: `model_a`, `model_b`), or of several
models on one lane (`@beam/sweep`: one per point, `model.p0`, `model.p1`, ...), publishes each
model's versions in its own key space; the lane is in every key and signed header, so an object
of one model copied into another's key space is refused (`wrong_lane`).

The signed header of each envelope repeats the version in its `window` field, so an object copied
to another version's key is rejected (`wrong_window`). The latest pointer cannot know its version
before it is read, so its header carries `window=POINTER_WINDOW` and the version in `base_version`.
"""

from __future__ import annotations

import torch

from subnet.storage.keys import ObjectKind, latest_key, object_key
from subnet.wire import Expected, TensorSpec

POINTER_WINDOW = 0  # header window of the latest-manifest pointer; its version is base_version
MANIFEST_MAX_BYTES = 256 * 1024  # a few hundred bytes of signed JSON, and up to 32 seals
DIGEST_BYTES = 32  # sha256

PATCH_SPEC: dict[str, TensorSpec] = {
    "data": TensorSpec(torch.uint8, (None,)),
    "counts": TensorSpec(torch.int64, (None,)),
    "base_sha256": TensorSpec(torch.uint8, (DIGEST_BYTES,)),
    "target_sha256": TensorSpec(torch.uint8, (DIGEST_BYTES,)),
}
"""The tensors of a `subnet.compression.patch.encode_patch` payload."""


def checkpoint_key(run: str, holder: str, version: int, lane: str | None = None) -> str:
    """Key of the full checkpoint of `version`."""
    return object_key(run, ObjectKind.CHECKPOINT, version, holder, lane=lane)


def patch_key(run: str, holder: str, version: int, lane: str | None = None) -> str:
    """Key of the patch that turns version `version - 1` into `version`."""
    return object_key(run, ObjectKind.MODEL_PATCH, version, holder, lane=lane)


def delta_key(run: str, holder: str, version: int, lane: str | None = None) -> str:
    """Key of the sparse update that turns version `version - 1` into `version`."""
    return object_key(run, ObjectKind.MODEL_DELTA, version, holder, lane=lane)


def manifest_key(run: str, holder: str, version: int, lane: str | None = None) -> str:
    """Key of the write-once manifest of `version`."""
    return object_key(run, ObjectKind.MODEL_MANIFEST, version, holder, lane=lane)


def pointer_key(run: str, holder: str, lane: str | None = None) -> str:
    """Key of the holder's latest manifest, overwritten with each new version."""
    return latest_key(run, ObjectKind.MODEL_MANIFEST, holder, lane=lane)


def expect_checkpoint(run: str, holder: str, version: int, lane: str | None = None) -> Expected:
    """What the checkpoint envelope of `version` must say about itself."""
    return Expected(run, version, ObjectKind.CHECKPOINT, holder, lane=lane)


def expect_patch(run: str, holder: str, version: int, lane: str | None = None) -> Expected:
    """What the patch envelope of `version` must say: it applies to version - 1."""
    return Expected(
        run, version, ObjectKind.MODEL_PATCH, holder, base_version=version - 1, lane=lane
    )


def expect_delta(run: str, holder: str, version: int, lane: str | None = None) -> Expected:
    """What the delta envelope of `version` must say: it applies to version - 1."""
    return Expected(
        run, version, ObjectKind.MODEL_DELTA, holder, base_version=version - 1, lane=lane
    )


def expect_manifest(run: str, holder: str, version: int, lane: str | None = None) -> Expected:
    """What the write-once manifest envelope of `version` must say."""
    return Expected(
        run, version, ObjectKind.MODEL_MANIFEST, holder, base_version=version, lane=lane
    )


def expect_pointer(run: str, holder: str, lane: str | None = None) -> Expected:
    """What the latest-manifest pointer must say; any version (checked against its content)."""
    return Expected(run, POINTER_WINDOW, ObjectKind.MODEL_MANIFEST, holder, lane=lane)
