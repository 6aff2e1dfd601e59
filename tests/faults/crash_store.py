"""An `ObjectStore` wrapper that "kills the process" at a chosen write, for crash-point tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from subnet.storage import ObjectInfo, ObjectStore


class Crash(BaseException):
    """The process died here (like `kill -9`): no `except Exception` in the code under test
    can catch it, so nothing after this point runs."""


When = Literal["before", "after"]


class CrashingStore:
    """Counts writes (`put`, `put_if_absent`); dies at write number `at` (1-based), either
    `before` performing it or right `after` it landed. `at=None` never dies (counting only)."""

    def __init__(self, inner: ObjectStore, at: int | None = None, when: When = "before") -> None:
        self.inner = inner
        self.at = at
        self.when = when
        self.writes: list[str] = []

    @property
    def location(self) -> str:
        return self.inner.location

    def _write(self, key: str, perform) -> object:
        self.writes.append(key)
        dies = len(self.writes) == self.at
        if dies and self.when == "before":
            raise Crash(f"killed before write {self.at} ({key})")
        result = perform()
        if dies:
            raise Crash(f"killed after write {self.at} ({key})")
        return result

    def put(self, key: str, data: bytes) -> None:
        self._write(key, lambda: self.inner.put(key, data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return bool(self._write(key, lambda: self.inner.put_if_absent(key, data)))

    def get(self, key: str, max_bytes: int) -> bytes:
        return self.inner.get(key, max_bytes)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)
