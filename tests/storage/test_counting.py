"""The byte meter: every request and answer counted on the wire, against a real S3 server."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from subnet.storage.base import ObjectNotFound, ObjectStore, ObjectTooLarge
from subnet.storage.counting import ByteMeter, CountingStore, counting_factory, ddp_ring_bytes
from subnet.storage.memory import MemoryStore
from subnet.storage.s3 import S3Store


def _counted(store: S3Store) -> tuple[CountingStore, ByteMeter]:
    meter = ByteMeter()
    return CountingStore(store, meter), meter


def test_object_bodies_match_the_sizes_moved_over_s3(store: S3Store) -> None:
    counted, meter = _counted(store)
    assert isinstance(counted, ObjectStore)
    sizes = [1, 1000, 65_537, 300]
    for i, n in enumerate(sizes):
        counted.put(f"k{i}", bytes([i]) * n)
    got = meter.take()
    assert got["body_bytes_up"] == sum(sizes)  # exactly the objects, nothing else has a body
    assert got["body_bytes_down"] == 0  # PUT answers carry no body
    assert got["requests"] == len(sizes)
    # Header lines are counted on top of the bodies, both ways, a few hundred bytes a request.
    assert 100 * len(sizes) < got["bytes_up"] - got["body_bytes_up"] < 2000 * len(sizes)
    assert 50 * len(sizes) < got["bytes_down"] < 2000 * len(sizes)
    for i, n in enumerate(sizes):
        assert counted.get(f"k{i}", 1 << 20) == bytes([i]) * n
    got = meter.take()
    assert got["body_bytes_down"] == sum(sizes)
    assert got["body_bytes_up"] == 0 and got["requests"] == len(sizes)


def test_conditional_puts_count_the_body_sent_even_when_refused(store: S3Store) -> None:
    counted, meter = _counted(store)
    assert counted.put_if_absent("b", b"y" * 300) is True
    assert counted.put_if_absent("b", b"z" * 300) is False  # refused, but the body was sent
    got = meter.take()
    # The refusal is a 412 with an XML error body, and the etag check a HEAD: both count.
    assert got["body_bytes_up"] == 600
    assert got["body_bytes_down"] > 0
    assert got["requests"] == 3  # two PUTs and the HEAD that compares etags


def test_head_list_and_errors_are_counted(store: S3Store, moto_server) -> None:
    store.put("a", b"x" * 5000)
    counted, meter = _counted(store)
    info = counted.head("a")
    got = meter.take()
    assert info.size == 5000
    assert got["body_bytes_down"] == 0  # HEAD announces 5000 bytes but sends none
    assert got["bytes_down"] > 0 and got["requests"] == 1
    listed = list(counted.list(""))
    got = meter.take()
    assert [i.key for i in listed] == ["a"]
    # The LIST answer's body is its XML: the same length a plain HTTP client reads.
    url = urlsplit(moto_server.endpoint_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", f"/{store.config.bucket}?list-type=2&prefix=&encoding-type=url")
    raw = conn.getresponse().read()
    conn.close()
    assert got["body_bytes_down"] == len(raw) > 0
    with pytest.raises(ObjectNotFound):
        counted.get("missing", 10)
    got = meter.take()
    assert got["requests"] == 1 and got["body_bytes_down"] > 0  # the NoSuchKey XML came down
    with pytest.raises(ObjectTooLarge):
        counted.get("a", 10)  # refused on the announced size: the body is never read
    assert meter.take()["body_bytes_down"] == 0


def test_multipart_parts_and_completion_count(make_store) -> None:
    store = make_store(multipart_threshold_bytes=6 * 1024 * 1024)
    counted, meter = _counted(store)
    data = bytes(range(256)) * (7 * 4096)  # 7 MiB: two parts of 5 MiB and 2 MiB
    counted.put("big", data)
    got = meter.take()
    # create, two parts, complete: the parts carry the object, the completion a small XML body
    assert got["requests"] == 4
    assert len(data) < got["body_bytes_up"] < len(data) + 1000
    assert counted.get("big", 1 << 24) == data
    assert meter.take()["body_bytes_down"] == len(data)


def test_one_meter_across_readers_and_no_double_count(make_store) -> None:
    meter = ByteMeter()
    own = CountingStore(make_store(), meter)
    reader = counting_factory(lambda: make_store(create=False), meter)()
    own.put("k", b"12345")
    assert reader.get("k", 10) == b"12345"
    got = meter.take()
    assert (got["body_bytes_up"], got["body_bytes_down"]) == (5, 5)  # once each, not twice
    again = CountingStore(own.inner, meter)  # wrapping the same store twice keeps one hook
    again.get("k", 10)
    assert meter.take()["body_bytes_down"] == 5


def test_stores_without_http_count_bodies_at_the_store() -> None:
    meter = ByteMeter()
    build = counting_factory(lambda name: MemoryStore(name), meter)
    a, b = build("a"), build("b")
    a.put("k", b"12345")
    b.put("k", b"123")
    b.get("k", 10)
    got = meter.take()
    assert (got["bytes_up"], got["bytes_down"], got["requests"]) == (8, 3, 0)
    assert meter.take()["bytes_up"] == 0  # take() starts afresh
    assert a.location == MemoryStore("a").location


def test_ddp_ring_bytes_known_answers() -> None:
    # 2 (n - 1) / n model sizes per step, each direction.
    assert ddp_ring_bytes(4, 1000, 10) == 10 * 2 * 3 / 4 * 1000 * 4 == 60_000
    assert ddp_ring_bytes(1, 1000, 10) == 0
    assert ddp_ring_bytes(2, 250, 1) == 1000  # half the gradient each way, twice
    with pytest.raises(ValueError):
        ddp_ring_bytes(0, 10, 1)
