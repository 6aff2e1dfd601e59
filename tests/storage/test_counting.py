"""The counting store: every object body up and down is counted, against a real S3 server."""

from __future__ import annotations

import pytest

from subnet.storage.base import ObjectNotFound, ObjectStore, ObjectTooLarge
from subnet.storage.counting import ByteMeter, CountingStore, counting_factory, ddp_ring_bytes
from subnet.storage.memory import MemoryStore


def test_counts_puts_gets_and_conditional_puts_over_s3(store: ObjectStore) -> None:
    meter = ByteMeter()
    store = CountingStore(store, meter)
    assert isinstance(store, ObjectStore)
    store.put("a", b"x" * 1000)
    assert store.put_if_absent("b", b"y" * 300) is True
    assert store.put_if_absent("b", b"z" * 300) is False  # refused, but the body was sent
    assert store.get("a", 10_000) == b"x" * 1000
    store.head("a")
    list(store.list(""))
    assert meter.take() == {"bytes_up": 1600, "bytes_down": 1000}
    assert meter.take() == {"bytes_up": 0, "bytes_down": 0}  # take() starts afresh
    with pytest.raises(ObjectNotFound):
        store.get("missing", 10)
    with pytest.raises(ObjectTooLarge):
        store.get("a", 10)  # refused before the body: nothing came down
    assert meter.take() == {"bytes_up": 0, "bytes_down": 0}


def test_factory_wraps_every_store_on_one_meter() -> None:
    meter = ByteMeter()
    build = counting_factory(lambda name: MemoryStore(name), meter)
    a, b = build("a"), build("b")
    a.put("k", b"12345")
    b.put("k", b"123")
    b.get("k", 10)
    assert meter.take() == {"bytes_up": 8, "bytes_down": 3}
    assert a.location == MemoryStore("a").location


def test_ddp_ring_bytes_known_answers() -> None:
    # 2 (n - 1) / n model sizes per step, each direction.
    assert ddp_ring_bytes(4, 1000, 10) == 10 * 2 * 3 / 4 * 1000 * 4 == 60_000
    assert ddp_ring_bytes(1, 1000, 10) == 0
    assert ddp_ring_bytes(2, 250, 1) == 1000  # half the gradient each way, twice
    with pytest.raises(ValueError):
        ddp_ring_bytes(0, 10, 1)
