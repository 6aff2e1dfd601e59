"""Honest byte accounting: a store wrapper that counts every byte a neuron sends and receives.

A neuron's own bucket and every peer reader are wrapped in :class:`CountingStore`, all sharing
one :class:`ByteMeter`, so the meter sees everything the neuron moves through object storage:
``up`` is the bodies it PUTs (uploads, reports, model versions, the dataset), ``down`` the bodies
it GETs (model patches and checkpoints, peers' uploads, reports, dataset shards). Request
overhead (HTTP headers, HEAD and LIST calls, retries) is not counted: the figures are object
bytes, the part that grows with the model.

:func:`ddp_ring_bytes` is the baseline the figures are compared with: data-parallel training
that all-reduces fp32 gradients every step with a ring all-reduce.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from subnet.storage.base import ObjectInfo, ObjectStore


@dataclass
class ByteMeter:
    """Bytes sent (``up``) and received (``down``) since the last :meth:`take`. Thread-safe."""

    up: int = 0
    down: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, up: int = 0, down: int = 0) -> None:
        """Count a transfer."""
        with self._lock:
            self.up += up
            self.down += down

    def take(self) -> dict[str, int]:
        """``{"bytes_up": ..., "bytes_down": ...}`` since the last call, and start counting anew."""
        with self._lock:
            out = {"bytes_up": self.up, "bytes_down": self.down}
            self.up = self.down = 0
        return out


class CountingStore:
    """An :class:`ObjectStore` that forwards every call and counts object bodies on a meter."""

    def __init__(self, inner: ObjectStore, meter: ByteMeter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.inner.location

    def put(self, key: str, data: bytes) -> None:
        """Write, then count ``len(data)`` up (a failed write raises and counts nothing)."""
        self.inner.put(key, data)
        self.meter.add(up=len(data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Conditional write; the body is sent whether or not the key was free, so it counts."""
        written = self.inner.put_if_absent(key, data)
        self.meter.add(up=len(data))
        return written

    def get(self, key: str, max_bytes: int) -> bytes:
        """Read, then count the body down."""
        data = self.inner.get(key, max_bytes)
        self.meter.add(down=len(data))
        return data

    def head(self, key: str) -> ObjectInfo:
        """Metadata only: not counted."""
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Metadata only: not counted."""
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        """No body: not counted."""
        self.inner.delete(key)

    def __getattr__(self, name: str):
        # Backend extras (S3Store.check, ...) pass straight through.
        return getattr(self.inner, name)


def counting_factory(
    factory: Callable[..., ObjectStore], meter: ByteMeter
) -> Callable[..., ObjectStore]:
    """Wrap a store factory (such as the reader pool's) so every store it builds is counted."""

    def build(*args, **kwargs) -> ObjectStore:
        return CountingStore(factory(*args, **kwargs), meter)

    return build


def ddp_ring_bytes(workers: int, params: int, steps: int, bytes_per_value: int = 4) -> int:
    """Bytes each worker sends (and, equally, receives) in ``steps`` ring all-reduces of a
    ``params``-value fp32 gradient: ``2 (n - 1) / n`` model sizes per step (Patarasuk and Yuan,
    2009). Zero for a single worker, which has nobody to talk to."""
    if workers < 1 or params < 0 or steps < 0:
        raise ValueError("workers >= 1, params >= 0 and steps >= 0")
    return round(steps * 2 * (workers - 1) / workers * params * bytes_per_value)
