"""Transient failures are retried with backoff; permanent ones give one clear error.

Faults come from a proxy in front of the real moto server, so every attempt is real HTTP.
"""

from __future__ import annotations

import os

import pytest

from subnet.storage.base import StorageError
from subnet.storage.local_server import free_port
from subnet.storage.s3 import backoff_delay

MIB = 1024 * 1024


def test_get_survives_injected_500s(make_store, fault_proxy) -> None:
    make_store().put("k", b"payload")
    store = make_store(endpoint=fault_proxy.endpoint_url, create=False)
    fault_proxy.inject("500", "500")
    assert store.get("k", 100) == b"payload"
    statuses = [status for method, _, status in fault_proxy.seen if method == "GET"]
    assert statuses == [500, 500, 200]


def test_write_once_is_idempotent_when_the_first_answer_is_lost(make_store, fault_proxy) -> None:
    store = make_store(endpoint=fault_proxy.endpoint_url)
    fault_proxy.inject("500")  # moto stores the object, the client sees a 500 and retries
    assert store.put_if_absent("once", b"mine") is True
    assert [s for m, _, s in fault_proxy.seen if m == "PUT"][-2:] == [500, 412]
    assert store.put_if_absent("once", b"theirs") is False


def test_multipart_survives_a_failed_part(make_store, fault_proxy) -> None:
    store = make_store(endpoint=fault_proxy.endpoint_url)
    data = os.urandom(11 * MIB)
    fault_proxy.inject(None, None, "500")  # create upload, part 1, then part 2 fails once
    store.put("large", data)
    assert store.get("large", len(data)) == data
    assert sum(1 for _, _, s in fault_proxy.seen if s == 500) == 1


def test_read_timeout_is_retried(make_store, fault_proxy) -> None:
    make_store().put("slow", b"eventually")
    store = make_store(endpoint=fault_proxy.endpoint_url, create=False, read_timeout_s=0.3)
    fault_proxy.delay_s = 1.0
    fault_proxy.inject("timeout")
    assert store.get("slow", 100) == b"eventually"
    assert (
        fault_proxy.arrived.count("GET") == 2
    )  # the first timed out (0.3 s < 1 s) and was retried


def test_retries_are_bounded(make_store, fault_proxy) -> None:
    make_store().put("k", b"v")
    store = make_store(endpoint=fault_proxy.endpoint_url, create=False, max_attempts=3)
    fault_proxy.inject("500", "500", "500", "500")
    with pytest.raises(StorageError) as caught:
        store.get("k", 10)
    assert caught.value.reason == "unavailable"
    assert len(fault_proxy.seen) == 3
    assert fault_proxy.endpoint_url in str(caught.value)
    assert store.config.bucket in str(caught.value)


def test_unreachable_endpoint_names_endpoint_and_bucket(make_store) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    store = make_store(endpoint=endpoint, bucket="nowhere", create=False, max_attempts=2)
    with pytest.raises(StorageError) as caught:
        store.check()
    assert caught.value.reason == "unreachable"
    assert endpoint in str(caught.value) and "nowhere" in str(caught.value)


def test_missing_bucket_is_one_clear_error(make_store) -> None:
    store = make_store(bucket="does-not-exist", create=False)
    for call in (store.check, lambda: store.get("k", 10), lambda: store.put("k", b"v")):
        with pytest.raises(StorageError) as caught:
            call()
        assert caught.value.reason == "bucket_not_found"
        assert "does-not-exist" in str(caught.value)
        assert store.config.endpoint_url in str(caught.value)


def test_backoff_is_jittered_exponential_and_capped() -> None:
    import random

    rng = random.Random(0)
    for attempt in range(1, 12):
        delays = [backoff_delay(attempt, 0.25, 8.0, rng) for _ in range(50)]
        assert all(0 <= d <= min(8.0, 0.25 * 2 ** (attempt - 1)) for d in delays)
    assert max(backoff_delay(10, 0.25, 8.0, rng) for _ in range(200)) > 4.0


def test_multipart_completion_whose_answer_is_lost(make_store, fault_proxy) -> None:
    store = make_store(endpoint=fault_proxy.endpoint_url)
    data = os.urandom(11 * MIB)  # create, 3 parts, then complete: moto completes, client sees 500
    fault_proxy.inject(None, None, None, None, "500")
    assert store.put_if_absent("large-once", data) is True
    completions = [s for m, p, s in fault_proxy.seen if m == "POST" and "uploadId=" in p]
    assert completions[0] == 500 and len(completions) == 2
    assert store.get("large-once", len(data)) == data
    assert store.put_if_absent("large-once", os.urandom(11 * MIB)) is False
