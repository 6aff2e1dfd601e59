"""The S3 store against a real moto server over HTTP: exact round trips and S3 semantics."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from subnet.storage.base import ObjectNotFound, ObjectStore, ObjectTooLarge, StorageError
from subnet.storage.s3 import S3Store, multipart_etag

MIB = 1024 * 1024


def test_is_an_object_store(store: S3Store) -> None:
    assert isinstance(store, ObjectStore)


@pytest.mark.parametrize("data", [b"", b"\x00\xffbeam\n", os.urandom(300_000)])
def test_round_trip_is_exact(store: S3Store, data: bytes) -> None:
    store.put("a/object", data)
    assert store.get("a/object", max_bytes=len(data)) == data
    info = store.head("a/object")
    assert info.size == len(data)
    assert info.etag == hashlib.md5(data).hexdigest()
    assert info.last_modified.tzinfo is not None


def test_put_replaces(store: S3Store) -> None:
    store.put("k", b"one")
    store.put("k", b"two")
    assert store.get("k", 10) == b"two"


def test_get_refuses_object_over_limit(store: S3Store) -> None:
    store.put("big", b"x" * 1001)
    with pytest.raises(ObjectTooLarge) as caught:
        store.get("big", max_bytes=1000)
    assert caught.value.reason == "too_large"
    assert store.config.bucket in str(caught.value)
    assert store.get("big", max_bytes=1001) == b"x" * 1001


def test_missing_key_is_not_found(store: S3Store) -> None:
    with pytest.raises(ObjectNotFound) as caught:
        store.get("nope", 10)
    assert caught.value.reason == "not_found"
    with pytest.raises(ObjectNotFound):
        store.head("nope")


def test_delete_is_idempotent(store: S3Store) -> None:
    store.put("gone", b"1")
    store.delete("gone")
    store.delete("gone")
    with pytest.raises(ObjectNotFound):
        store.get("gone", 10)


def test_write_once_conflict_keeps_the_first_object(store: S3Store) -> None:
    assert store.put_if_absent("once", b"first") is True
    assert store.put_if_absent("once", b"second") is False
    assert store.get("once", 100) == b"first"
    # Re-sending identical bytes (a retried upload) is not a conflict.
    assert store.put_if_absent("once", b"first") is True


def test_the_write_once_probe_passes_here_and_names_a_store_that_ignores_it(
    store: S3Store, monkeypatch
) -> None:
    store.check_write_once()  # moto refuses a second conditional write, as S3 and R2 do
    assert list(store.list("beam-probe/")) == []  # the probe cleans up after itself
    real = S3Store._write
    monkeypatch.setattr(S3Store, "_write",
                        lambda self, key, data, *, if_absent: real(self, key, data, if_absent=False))  # fmt: skip
    with pytest.raises(StorageError) as caught:
        store.check_write_once()
    assert caught.value.reason == "no_write_once"
    assert list(store.list("beam-probe/")) == []


def test_listing_pages_through_more_than_1000_keys(store: S3Store) -> None:
    keys = [f"many/{i:05d}" for i in range(1_050)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda k: store.put(k, k.encode()), keys))
    store.put("other/outside", b"x")
    listed = list(store.list("many/"))
    assert [info.key for info in listed] == keys
    assert all(info.size == len(info.key) for info in listed)
    assert len(list(store.list(""))) == 1_051


def test_prefix_isolates_stores(make_store) -> None:
    room_a = make_store(prefix="rooms/a/")
    room_b = make_store(prefix="rooms/b/")
    room_a.put("k", b"a")
    room_b.put("k", b"b")
    assert room_a.get("k", 10) == b"a"
    assert [i.key for i in room_a.list()] == ["k"]
    assert [i.key for i in make_store().list()] == ["rooms/a/k", "rooms/b/k"]


def test_large_object_goes_multipart_and_round_trips(store: S3Store) -> None:
    data = os.urandom(12 * MIB)  # threshold 8 MiB, parts of 5 MiB: 3 parts
    store.put("large", data)
    info = store.head("large")
    assert info.etag == multipart_etag(data, 5 * MIB)
    assert info.etag.endswith("-3")
    assert store.get("large", max_bytes=len(data)) == data


def test_multipart_write_once(store: S3Store) -> None:
    data = os.urandom(9 * MIB)
    assert store.put_if_absent("large-once", data) is True
    assert store.put_if_absent("large-once", data) is True  # identical retry
    assert store.put_if_absent("large-once", os.urandom(9 * MIB)) is False
    assert store.get("large-once", len(data)) == data
