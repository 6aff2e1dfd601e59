"""Model versions: the holder publishes them, miners and validators sync to them (DESIGN §3.7-8).

Public API:

- `ModelManifest`: version, window, digest (hex `state_digest`), checkpoint_version and keys.
- `VersionPublisher(store, signer, run, *, checkpoint_every)`: `.publish(state, window, delta)`
  writes version v+1 as the sparse `delta` (when it rebuilds `state` from v bit for bit) or a
  lossless patch against v, a full checkpoint every `checkpoint_every` versions, then its signed
  manifest; a new publisher on the same store resumes at the next version.
- `subnet.versions.delta`: the sparse broadcast (`Resparsifier` on the holder, `apply_delta`).
- `ModelSync(store_or_reader, holder_hotkey, run, *, max_bytes)`: `.latest()` and
  `.sync(state, version) -> (state, manifest)`, digest-checked or `SyncError(reason, detail)`.
- `model_state(model)` / `load_state(model, state)`: torch model <-> fp32 CPU state dict.

Key layout and envelope headers: `subnet.versions.layout`.
"""

from subnet.versions.errors import PublishError, SyncError
from subnet.versions.manifest import ModelManifest, read_manifest, read_pointer
from subnet.versions.publisher import VersionPublisher
from subnet.versions.state import load_state, model_state
from subnet.versions.sync import ModelSync

__all__ = [
    "ModelManifest",
    "ModelSync",
    "PublishError",
    "SyncError",
    "VersionPublisher",
    "load_state",
    "model_state",
    "read_manifest",
    "read_pointer",
]
