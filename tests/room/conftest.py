"""Room fixtures: named keys, a room on a real S3 bucket (moto over HTTP), read settings."""

from __future__ import annotations

import itertools

import pytest
from room_support import key, read_of

from subnet.room.ops import create_room
from subnet.room.store import RoomStore
from subnet.storage.config import StorageConfig
from subnet.storage.s3 import S3Store

_ids = itertools.count()


@pytest.fixture
def s3(moto_server) -> S3Store:
    """A fresh bucket on the session's moto server."""
    config = StorageConfig(bucket=f"beam-room-{next(_ids)}", endpoint_url=moto_server.endpoint_url,
                           addressing_style="path", backoff_base_s=0.01, backoff_max_s=0.05)  # fmt: skip
    store = S3Store.from_config(config, moto_server.environ())
    store.ensure_bucket()
    return store


@pytest.fixture
def room(s3: S3Store) -> RoomStore:
    """Room ``lab`` owned by ``//Owner``, freshly created."""
    rs = RoomStore(s3, "lab")
    create_room(rs, key("Owner"), read_of("beam-owner"))
    return rs
