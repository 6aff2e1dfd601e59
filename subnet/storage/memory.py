"""An in-process `ObjectStore` for unit tests of code that only needs the protocol.

Integration tests use the real S3 server (`subnet.storage.local_server`) instead.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import datetime, timezone

from subnet.storage.base import ObjectInfo, ObjectNotFound, ObjectTooLarge


class MemoryStore:
    """A dict-backed `ObjectStore` with the same semantics as the S3 store."""

    def __init__(self, name: str = "memory") -> None:
        self._name = name
        self._objects: dict[str, tuple[bytes, datetime]] = {}
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        """`memory://<name>`."""
        return f"memory://{self._name}"

    def put(self, key: str, data: bytes) -> None:
        """Write `data` under `key`, replacing any existing object."""
        with self._lock:
            self._objects[key] = (bytes(data), datetime.now(timezone.utc))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write only if `key` is free; True when the key now holds exactly `data`."""
        with self._lock:
            existing = self._objects.get(key)
            if existing is not None:
                return existing[0] == data
            self._objects[key] = (bytes(data), datetime.now(timezone.utc))
            return True

    def get(self, key: str, max_bytes: int) -> bytes:
        """Read the object, refusing it past `max_bytes`."""
        data = self._entry(key)[0]
        if len(data) > max_bytes:
            raise ObjectTooLarge(
                "too_large",
                endpoint=self.location,
                bucket=self._name,
                key=key,
                detail=f"{len(data)} bytes > limit {max_bytes}",
            )
        return data

    def head(self, key: str) -> ObjectInfo:
        """Size and last-modified time of the object."""
        data, modified = self._entry(key)
        return ObjectInfo(
            key, len(data), modified, hashlib.md5(data, usedforsecurity=False).hexdigest()
        )

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects under `prefix`, in key order."""
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
        for key in keys:
            yield self.head(key)

    def delete(self, key: str) -> None:
        """Remove the object if present."""
        with self._lock:
            self._objects.pop(key, None)

    def _entry(self, key: str) -> tuple[bytes, datetime]:
        with self._lock:
            entry = self._objects.get(key)
        if entry is None:
            raise ObjectNotFound("not_found", endpoint=self.location, bucket=self._name, key=key)
        return entry
