"""Shared helpers of the version tests: constants, a publishing loop, a counting store, tampering."""

from __future__ import annotations

from collections.abc import Iterator

from bittensor.sp_core import Keypair
from torch import Tensor

from subnet.storage import ObjectInfo, ObjectStore
from subnet.versions import VersionPublisher

RUN = "versions-run"
CHECKPOINT_EVERY = 3
VERSIONS = 7  # v0 .. v6
WINDOWS = [-1, 10, 11, 12, 14, 15, 17]  # v0 is the initial model; windows may skip


def publish_all(
    store: ObjectStore, holder: Keypair, history: list[dict[str, Tensor]], upto: int
) -> VersionPublisher:
    """Publish versions 0 .. `upto` of `history` with one publisher."""
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY)
    for version in range(upto + 1):
        publisher.publish(history[version], WINDOWS[version])
    return publisher


class CountingStore:
    """Wraps a store and records the key of every `get`."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.gets: list[str] = []

    @property
    def location(self) -> str:
        return self.inner.location

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def get(self, key: str, max_bytes: int) -> bytes:
        self.gets.append(key)
        return self.inner.get(key, max_bytes)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


def tamper(store: ObjectStore, key: str) -> None:
    """Flip one bit of the object's last byte (inside the payload) in place."""
    blob = bytearray(store.get(key, 1 << 30))
    blob[-1] ^= 0x01
    store.put(key, bytes(blob))
