"""Forged, replayed and corrupt version objects: refused, and nobody is left stuck.

Replicas keep their current version (or move forward past the bad object), the holder keeps
publishing, and a signed patch with a corrupt stream sends readers to the checkpoint.
"""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair
from torch import Tensor

from subnet.compression.patch import state_digest
from subnet.storage import MemoryStore
from subnet.storage.keys import ObjectKind
from subnet.versions import ModelSync, SyncError, VersionPublisher, layout, read_pointer
from subnet.versions.manifest import encode_manifest
from subnet.wire import encode_envelope, verify_envelope

RUN = "faults-run"
HOLDER = Keypair.create_from_seed(bytes(range(32)))
STRANGER = Keypair.create_from_uri("//Mallory")
WHO = HOLDER.ss58_address
MAX = 1 << 24


def _states(n: int) -> list[dict[str, Tensor]]:
    g = torch.Generator().manual_seed(5)
    return [
        {"a": torch.randn(256, generator=g), "b": torch.randn(8, 8, generator=g)} for _ in range(n)
    ]


STATES = _states(6)


def _publish(store: MemoryStore, upto: int, every: int = 3) -> VersionPublisher:
    publisher = VersionPublisher(store, HOLDER, RUN, checkpoint_every=every, max_bytes=MAX)
    for v in range(upto + 1):
        publisher.publish(STATES[v], v - 1)
    return publisher


def _corrupt_patch(store: MemoryStore, version: int) -> None:
    """Re-sign version's patch (as the holder) with a broken zlib stream: a holder-side bug."""
    key = layout.patch_key(RUN, WHO, version)
    expected = layout.expect_patch(RUN, WHO, version)
    tensors = dict(verify_envelope(store.get(key, MAX), expected, None, max_bytes=MAX).tensors)
    data = tensors["data"].clone()
    data[2:] = 0xA5  # keeps the zlib header, breaks the stream
    tensors["data"] = data
    store.put(key, encode_envelope(signer=HOLDER, run=RUN, kind=ObjectKind.MODEL_PATCH,
                                   window=version, tensors=tensors, base_version=version - 1))  # fmt: skip


def _digest(state: dict[str, Tensor]) -> str:
    return state_digest(state).hex()


def test_corrupt_patch_falls_back_to_the_checkpoint() -> None:
    store = MemoryStore()
    _publish(store, 3)  # checkpoints at 0 and 3
    _corrupt_patch(store, 2)
    syncer = ModelSync(store, WHO, RUN, max_bytes=MAX)
    state, manifest = syncer.sync(STATES[1], 1)
    assert manifest.version == 3 and _digest(state) == _digest(STATES[3])
    assert syncer.last_path == "checkpoint"
    assert syncer.last_fallback is not None and syncer.last_fallback.reason == "patch:corrupt"


def test_corrupt_patch_with_no_way_around_leaves_the_replica_where_it_was() -> None:
    store = MemoryStore()
    _publish(store, 2)  # only checkpoint 0: every path needs patch 2
    _corrupt_patch(store, 2)
    local = {k: v.clone() for k, v in STATES[1].items()}
    with pytest.raises(SyncError) as caught:
        ModelSync(store, WHO, RUN, max_bytes=MAX).sync(local, 1)
    assert caught.value.reason == "patch:corrupt"
    assert _digest(local) == _digest(STATES[1])


def test_holder_restarted_under_a_forged_pointer_repairs_it_and_keeps_publishing() -> None:
    store = MemoryStore()
    _publish(store, 3)
    manifest = read_pointer(store, RUN, WHO)
    store.put(layout.pointer_key(RUN, WHO), encode_manifest(STRANGER, RUN, manifest, pointer=True))
    restarted = VersionPublisher(store, HOLDER, RUN, checkpoint_every=3, max_bytes=MAX)
    assert restarted.resume().version == 3  # no crash loop on `resume:rejected`
    assert read_pointer(store, RUN, WHO).version == 3  # repaired: peers read it again
    assert restarted.publish(STATES[4], 3).version == 4


def test_a_forged_object_in_the_next_version_slot_does_not_block_the_holder() -> None:
    store = MemoryStore()
    publisher = _publish(store, 2)
    fake = read_pointer(store, RUN, WHO).model_copy(update={"version": 3, "window": 2})
    store.put(layout.manifest_key(RUN, WHO, 3), encode_manifest(STRANGER, RUN, fake, pointer=False))
    store.put(layout.patch_key(RUN, WHO, 3), b"not even an envelope")
    syncer = ModelSync(store, WHO, RUN, max_bytes=MAX)
    assert syncer.latest().version == 2  # the forged manifest commits nothing
    assert publisher.publish(STATES[3], 2).version == 3  # and is replaced
    state, manifest = syncer.sync(STATES[2], 2)
    assert manifest.version == 3 and _digest(state) == _digest(STATES[3])


def test_a_replayed_pointer_neither_rolls_replicas_back_nor_stops_the_holder() -> None:
    store = MemoryStore()
    publisher = _publish(store, 2)
    old = store.get(layout.pointer_key(RUN, WHO), MAX)
    publisher.publish(STATES[3], 2)
    replica = ModelSync(store, WHO, RUN, max_bytes=MAX)
    state, manifest = replica.sync(None, None)
    store.put(layout.pointer_key(RUN, WHO), old)  # replayed: validly signed, version 2
    again, latest = replica.sync(state, manifest.version)
    assert latest.version == 3 and replica.last_path == "current"
    assert (
        VersionPublisher(store, HOLDER, RUN, checkpoint_every=3, max_bytes=MAX).resume().version
        == 3
    )
    assert publisher.publish(STATES[4], 3).version == 4  # the running holder goes on too
    assert ModelSync(store, WHO, RUN, max_bytes=MAX).sync(again, 3)[1].version == 4
