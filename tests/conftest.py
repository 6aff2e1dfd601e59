"""Fixtures shared across test folders: one real S3 server (moto over HTTP) per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from subnet.storage.local_server import MotoServer


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A `moto_server` subprocess on a free 127.0.0.1 port; `.endpoint_url`, `.environ()`."""
    with MotoServer() as server:
        yield server
