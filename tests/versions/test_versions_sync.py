"""Syncing to the holder's latest version: the patch path, the checkpoint path, and bad data."""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair
from torch import Tensor
from versions_support import RUN, CountingStore, publish_all, tamper

from subnet.compression.patch import state_digest
from subnet.storage import MemoryStore
from subnet.storage.readers import ReaderPool
from subnet.versions import ModelSync, SyncError, layout, read_pointer
from subnet.versions.manifest import encode_manifest

MAX_BYTES = 16 << 20


def _syncer(store: object, holder: Keypair, **kwargs: object) -> ModelSync:
    return ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX_BYTES, **kwargs)  # type: ignore[arg-type]


def _assert_exact(state: dict[str, Tensor], want: dict[str, Tensor]) -> None:
    assert set(state) == set(want)
    for name in want:
        assert torch.equal(state[name].view(torch.int32), want[name].view(torch.int32)), name
    assert state_digest(state) == state_digest(want)


def test_fresh_syncer_loads_the_latest_checkpoint(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(published)
    state, manifest = _syncer(store, holder).sync(None, None)
    assert manifest.version == 6 and manifest.checkpoint_version == 6
    assert manifest.digest == state_digest(history[6]).hex()
    _assert_exact(state, history[6])
    who = holder.ss58_address
    assert store.gets == [
        layout.pointer_key(RUN, who),
        layout.manifest_key(RUN, who, 7),  # is the pointer current? (a crash can leave it behind)
        layout.checkpoint_key(RUN, who, 6),
    ]


def test_fresh_syncer_applies_patches_after_the_checkpoint(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(MemoryStore())
    publish_all(store, holder, history, 5)
    store.gets.clear()
    syncer = _syncer(store, holder)
    state, manifest = syncer.sync(None, None)
    assert manifest.version == 5 and manifest.checkpoint_version == 3
    _assert_exact(state, history[5])
    who = holder.ss58_address
    assert store.gets == [
        layout.pointer_key(RUN, who),
        layout.manifest_key(RUN, who, 6),
        layout.checkpoint_key(RUN, who, 3),
        layout.manifest_key(RUN, who, 4),  # patch or delta? each version's manifest says
        layout.patch_key(RUN, who, 4),
        layout.patch_key(RUN, who, 5),
    ]
    assert syncer.last_path == "checkpoint"


def test_syncer_behind_applies_only_the_missing_patches(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(published)
    syncer = _syncer(store, holder)
    state, manifest = syncer.sync(history[4], 4)
    _assert_exact(state, history[6])
    who = holder.ss58_address
    assert store.gets == [
        layout.pointer_key(RUN, who),
        layout.manifest_key(RUN, who, 7),
        layout.manifest_key(RUN, who, 5),
        layout.patch_key(RUN, who, 5),
        layout.patch_key(RUN, who, 6),
    ]
    assert syncer.last_path == "patches" and syncer.last_fallback is None


def test_syncer_at_latest_reads_the_pointer_and_probes_the_next_manifest(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(published)
    syncer = _syncer(store, holder)
    state, manifest = syncer.sync(history[6], 6)
    assert manifest.version == 6 and syncer.last_path == "current"
    _assert_exact(state, history[6])
    who = holder.ss58_address
    assert store.gets == [layout.pointer_key(RUN, who), layout.manifest_key(RUN, who, 7)]


def test_too_far_behind_takes_the_checkpoint(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(published)
    syncer = _syncer(store, holder, max_patches=1)
    state, _ = syncer.sync(history[4], 4)
    _assert_exact(state, history[6])
    assert layout.checkpoint_key(RUN, holder.ss58_address, 6) in store.gets
    assert not any("/model-patch/" in key for key in store.gets)


def test_tampered_patch_falls_back_to_the_checkpoint(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    tamper(published, layout.patch_key(RUN, holder.ss58_address, 5))
    syncer = _syncer(published, holder)
    state, manifest = syncer.sync(history[4], 4)
    _assert_exact(state, history[6])
    assert syncer.last_path == "checkpoint"
    assert syncer.last_fallback is not None
    assert syncer.last_fallback.reason == "rejected:digest_mismatch"


def test_tampered_patch_with_no_way_around_raises_and_leaves_state_alone(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publish_all(store, holder, history, 5)  # latest 5, checkpoint 3: every path needs patch 5
    tamper(store, layout.patch_key(RUN, holder.ss58_address, 5))
    local = {k: v.clone() for k, v in history[4].items()}
    with pytest.raises(SyncError) as caught:
        _syncer(store, holder).sync(local, 4)
    assert caught.value.reason == "rejected:digest_mismatch"
    _assert_exact(local, history[4])


def test_missing_patch_falls_back_to_the_checkpoint(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    published.delete(layout.patch_key(RUN, holder.ss58_address, 6))
    syncer = _syncer(published, holder)
    state, _ = syncer.sync(history[4], 4)
    _assert_exact(state, history[6])
    assert syncer.last_fallback is not None
    assert syncer.last_fallback.reason == "missing_version"


def test_local_state_off_its_version_falls_back(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    syncer = _syncer(published, holder)
    state, _ = syncer.sync(history[3], 4)  # claims version 4, holds version 3
    _assert_exact(state, history[6])
    assert syncer.last_fallback is not None
    assert syncer.last_fallback.reason == "patch:base_mismatch"


def test_tampered_checkpoint_walks_back_to_the_previous_one(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    who = holder.ss58_address
    tamper(published, layout.checkpoint_key(RUN, who, 6))
    store = CountingStore(published)
    state, _ = _syncer(store, holder).sync(None, None)
    _assert_exact(state, history[6])
    assert store.gets[-6:] == [
        layout.manifest_key(RUN, who, 5),  # read once: when walking back, and for patch 5
        layout.checkpoint_key(RUN, who, 3),
        layout.manifest_key(RUN, who, 4),
        layout.patch_key(RUN, who, 4),
        layout.patch_key(RUN, who, 5),
        layout.patch_key(RUN, who, 6),
    ]


def test_tampered_checkpoint_without_walk_back_raises(
    published: MemoryStore, holder: Keypair
) -> None:
    tamper(published, layout.checkpoint_key(RUN, holder.ss58_address, 6))
    with pytest.raises(SyncError) as caught:
        _syncer(published, holder, max_checkpoints=1).sync(None, None)
    assert caught.value.reason == "rejected:digest_mismatch"


def test_replayed_older_pointer_is_passed_over(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publisher = publish_all(store, holder, history, 5)
    pointer = layout.pointer_key(RUN, holder.ss58_address)
    old_pointer = store.get(pointer, MAX_BYTES)
    publisher.publish(history[6], 17)
    syncer = _syncer(store, holder)
    assert syncer.latest().version == 6
    store.put(pointer, old_pointer)  # a validly signed, older pointer replayed
    assert syncer.latest().version == 6  # version 6's write-once manifest is still there
    assert _syncer(store, holder).latest().version == 6  # a fresh peer is not fooled either
    state, _ = _syncer(store, holder).sync(history[5], 5)
    _assert_exact(state, history[6])


def test_forged_pointer_is_ignored(
    published: MemoryStore, holder: Keypair, stranger: Keypair, history: list[dict[str, Tensor]]
) -> None:
    pointer = layout.pointer_key(RUN, holder.ss58_address)
    manifest = read_pointer(published, RUN, holder.ss58_address)
    published.put(pointer, encode_manifest(stranger, RUN, manifest, pointer=True))
    state, latest = _syncer(published, holder).sync(history[4], 4)
    assert latest.version == 6
    _assert_exact(state, history[6])
    published.put(pointer, b"garbage")
    assert _syncer(published, holder).latest().version == 6


def test_versions_gone_from_the_bucket_are_a_rollback(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publish_all(store, holder, history, 5)
    syncer = _syncer(store, holder)
    assert syncer.latest().version == 5
    for info in list(store.list()):
        store.delete(info.key)  # the holder started over on an empty bucket
    publish_all(store, holder, history, 1)
    with pytest.raises(SyncError) as caught:
        syncer.latest()
    assert caught.value.reason == "rollback"


def test_local_state_ahead_of_the_holder_is_refused(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    with pytest.raises(SyncError) as caught:
        _syncer(published, holder).sync(history[6], 7)
    assert caught.value.reason == "rollback"


def test_nothing_published(holder: Keypair) -> None:
    with pytest.raises(SyncError) as caught:
        _syncer(MemoryStore(), holder).sync(None, None)
    assert caught.value.reason == "not_published"


def test_reader_pool_without_commitment(holder: Keypair) -> None:
    with pytest.raises(SyncError) as caught:
        _syncer(ReaderPool(), holder).latest()
    assert caught.value.reason == "no_reader"


def test_local_state_at_latest_that_does_not_match_is_replaced(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    syncer = _syncer(published, holder)
    state, _ = syncer.sync(history[5], 6)  # claims the latest version, holds version 5
    _assert_exact(state, history[6])
    assert syncer.last_path == "checkpoint"
    assert syncer.last_fallback is not None and syncer.last_fallback.reason == "digest_mismatch"


def test_manifest_digest_that_no_state_matches_raises(
    published: MemoryStore, holder: Keypair
) -> None:
    who = holder.ss58_address
    latest = read_pointer(published, RUN, who)
    wrong = latest.model_copy(update={"digest": "00" * 32})
    published.put(layout.pointer_key(RUN, who), encode_manifest(holder, RUN, wrong, pointer=True))
    with pytest.raises(SyncError) as caught:
        _syncer(published, holder).sync(None, None)
    assert caught.value.reason == "digest_mismatch"


def test_a_pointer_that_moves_forward_costs_one_read_one_that_stalls_is_checked(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = CountingStore(MemoryStore())
    publisher = publish_all(store, holder, history, 4)
    syncer = _syncer(store, holder)
    assert syncer.latest().version == 4
    publisher.publish(history[5], 15)
    store.gets.clear()
    assert syncer.latest().version == 5
    who = holder.ss58_address
    assert store.gets == [layout.pointer_key(RUN, who)]  # moved on: trusted as is
    store.gets.clear()
    assert syncer.latest().version == 5
    assert store.gets == [layout.pointer_key(RUN, who), layout.manifest_key(RUN, who, 6)]
