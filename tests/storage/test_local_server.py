"""The local S3 server helper starts, answers real S3 over HTTP, resets and stops."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from subnet.storage.local_server import MotoServer


def test_lifecycle(make_store) -> None:
    with MotoServer() as server:
        endpoint = server.endpoint_url
        store = make_store(endpoint=endpoint, bucket="lifecycle")
        store.put("k", b"v")
        assert store.get("k", 10) == b"v"
        server.reset()
        assert [b for b in [store.config.bucket] if _bucket_exists(store)] == []
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(endpoint, timeout=1)


def _bucket_exists(store) -> bool:
    from subnet.storage.base import StorageError

    try:
        store.check()
    except StorageError as exc:
        assert exc.reason == "bucket_not_found"
        return False
    return True
