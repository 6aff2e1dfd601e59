"""Publishing versions: layout, checkpoints, resume after a restart, idempotence, refusals."""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair
from torch import Tensor
from versions_support import CHECKPOINT_EVERY, RUN, WINDOWS, CountingStore, publish_all

from subnet.compression.patch import state_digest
from subnet.storage import MemoryStore, StorageError
from subnet.storage.keys import ObjectKind, kind_prefix
from subnet.versions import ModelSync, PublishError, VersionPublisher, layout, read_pointer

MAX_BYTES = 16 << 20


def _versions(store: MemoryStore, kind: ObjectKind) -> list[int]:
    prefix = kind_prefix(RUN, kind)
    return [
        int(i.key[len(prefix) :].split("/")[0]) for i in store.list(prefix) if "latest" not in i.key
    ]


def _contents(store: MemoryStore) -> dict[str, bytes]:
    return {info.key: store.get(info.key, MAX_BYTES) for info in store.list()}


class _CrashBeforePointer(CountingStore):
    """A holder that dies right before moving the pointer: every write-once object is in place."""

    def put(self, key: str, data: bytes) -> None:
        if "/latest/" in key:
            raise StorageError("unreachable", endpoint="test", bucket="test", key=key)
        self.inner.put(key, data)


def test_layout_of_seven_versions(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    assert _versions(published, ObjectKind.CHECKPOINT) == [0, 3, 6]
    assert _versions(published, ObjectKind.MODEL_PATCH) == [1, 2, 3, 4, 5, 6]
    assert _versions(published, ObjectKind.MODEL_MANIFEST) == list(range(7))
    latest = read_pointer(published, RUN, holder.ss58_address)
    assert (latest.version, latest.window, latest.checkpoint_version) == (6, WINDOWS[6], 6)
    assert latest.digest == state_digest(history[6]).hex()


def test_publish_returns_the_manifest_and_keeps_no_reference_to_the_input(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    state = {k: v.clone() for k, v in history[0].items()}
    first = publisher.publish(state, -1)
    assert (first.version, first.window, first.patch_key) == (0, -1, None)
    for tensor in state.values():
        tensor.add_(1.0)  # the trainer keeps going; the published version must not move
    second = publisher.publish(history[1], WINDOWS[1])
    assert second.version == 1 and publisher.latest == second
    synced, _ = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX_BYTES).sync(history[0], 0)
    assert state_digest(synced) == state_digest(history[1])


def test_restarted_publisher_continues_at_the_next_version(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publish_all(store, holder, history, 4)
    restarted = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    assert restarted.latest is None  # nothing is read before the first publish
    manifest = restarted.publish(history[5], WINDOWS[5])
    assert (manifest.version, manifest.checkpoint_version) == (5, 3)
    assert restarted.publish(history[6], WINDOWS[6]).checkpoint_version == 6
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX_BYTES)
    state, latest = syncer.sync(history[4], 4)
    assert latest.version == 6 and syncer.last_path == "patches"
    assert state_digest(state) == state_digest(history[6])


def test_resume_reports_the_latest_version_and_its_state(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    assert VersionPublisher(MemoryStore(), holder, RUN, checkpoint_every=3).resume() is None
    restarted = VersionPublisher(published, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    manifest = restarted.resume()
    assert manifest is not None and manifest.version == 6 and restarted.latest == manifest
    state = restarted.latest_state
    assert state is not None and state_digest(state) == state_digest(history[6])


def test_republishing_the_latest_version_changes_nothing(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    before = _contents(published)
    restarted = VersionPublisher(published, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    manifest = restarted.publish(history[6], WINDOWS[6])
    assert manifest == read_pointer(published, RUN, holder.ss58_address)
    assert _contents(published) == before


def test_retry_after_a_crash_keeps_the_first_attempts_objects(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publish_all(store, holder, history, 3)
    crashing = VersionPublisher(
        _CrashBeforePointer(store), holder, RUN, checkpoint_every=CHECKPOINT_EVERY
    )
    with pytest.raises(StorageError):
        crashing.publish(history[4], WINDOWS[4])
    orphans = {k: v for k, v in _contents(store).items() if "/000000000004/" in k}
    assert len(orphans) == 2  # the patch and the write-once manifest of version 4
    assert read_pointer(store, RUN, holder.ss58_address).version == 3

    retry = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    assert retry.publish(history[4], WINDOWS[4]).version == 4
    assert {k: v for k, v in _contents(store).items() if k in orphans} == orphans
    state, _ = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX_BYTES).sync(history[3], 3)
    assert state_digest(state) == state_digest(history[4])


def test_a_committed_version_whose_pointer_was_lost_is_adopted(
    holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    store = MemoryStore()
    publish_all(store, holder, history, 3)
    crashing = VersionPublisher(
        _CrashBeforePointer(store), holder, RUN, checkpoint_every=CHECKPOINT_EVERY
    )
    with pytest.raises(StorageError):
        crashing.publish(history[4], WINDOWS[4])
    retry = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    assert retry.resume().version == 4  # the manifest is the commit point, not the pointer
    assert read_pointer(store, RUN, holder.ss58_address).version == 4  # repaired
    with pytest.raises(PublishError) as caught:
        retry.publish(history[5], WINDOWS[4])  # version 4 is window 14's for good
    assert caught.value.reason == "window_not_after_latest"
    assert retry.publish(history[5], WINDOWS[5]).version == 5


def test_windows_must_increase(published: MemoryStore, holder: Keypair, history) -> None:
    publisher = VersionPublisher(published, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    with pytest.raises(PublishError) as caught:
        publisher.publish(history[5], WINDOWS[6])  # same window, other state
    assert caught.value.reason == "window_not_after_latest"


def test_state_with_other_tensors_is_refused(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    publisher = VersionPublisher(published, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    state = dict(history[6])
    state["extra"] = torch.zeros(3)
    with pytest.raises(PublishError) as caught:
        publisher.publish(state, 99)
    assert caught.value.reason == "state_mismatch"


def test_resume_from_a_corrupt_store_is_an_error(
    published: MemoryStore, holder: Keypair, history: list[dict[str, Tensor]]
) -> None:
    published.delete(layout.checkpoint_key(RUN, holder.ss58_address, 6))
    published.delete(layout.checkpoint_key(RUN, holder.ss58_address, 3))
    publisher = VersionPublisher(published, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    with pytest.raises(PublishError) as caught:
        publisher.publish(history[6], 99)
    assert caught.value.reason == "resume:missing_version"


def test_checkpoint_every_must_be_positive(holder: Keypair) -> None:
    with pytest.raises(ValueError):
        VersionPublisher(MemoryStore(), holder, RUN, checkpoint_every=0)
