"""Where datasets are written and read: a key-value interface small enough to plug anything in.

The dataset code needs only ``put(key, data)`` to write and ``get(key)`` to read, so
`subnet.storage`'s ObjectStore (or any S3 client wrapper) fits without changes here; `Prefixed`
scopes a shared store to one dataset prefix. `LocalFolder` is the implementation for disks.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol


class Sink(Protocol):
    """Write side: store `data` under `key` (overwriting)."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`."""
        ...


class Source(Protocol):
    """Read side: the bytes stored under `key`; raises KeyError or FileNotFoundError if absent."""

    def get(self, key: str) -> bytes:
        """Return the bytes under `key`."""
        ...


class LocalFolder:
    """A folder on disk as a Sink and Source; keys are relative paths with "/" separators."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalFolder({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key {key!r} escapes {self.root}")
        return path

    def put(self, key: str, data: bytes) -> None:
        """Write atomically (temp file + rename), so a crash never leaves a half-written object."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)  # mkstemp makes files private; datasets are meant to be shared
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        """Read the file at `key`."""
        return self._path(key).read_bytes()

    def exists(self, key: str) -> bool:
        """Whether `key` is present."""
        return self._path(key).is_file()


class Prefixed:
    """A view of another store under ``prefix/``: put and get forward with the prefix added."""

    def __init__(self, store: Sink | Source, prefix: str) -> None:
        self.store = store
        self.prefix = prefix.strip("/")

    def __repr__(self) -> str:
        return f"Prefixed({self.store!r}, {self.prefix!r})"

    def put(self, key: str, data: bytes) -> None:
        """Store under ``prefix/key``."""
        self.store.put(f"{self.prefix}/{key}", data)  # type: ignore[union-attr]

    def get(self, key: str) -> bytes:
        """Read ``prefix/key``."""
        return self.store.get(f"{self.prefix}/{key}")  # type: ignore[union-attr]
