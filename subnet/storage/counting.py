"""Honest byte accounting: what a neuron sends and receives through object storage.

A neuron's own bucket and every peer reader are wrapped in :class:`CountingStore`, all sharing
one :class:`ByteMeter`. Over S3 the wrapper hands the meter to the store, which counts at the
HTTP layer (:func:`meter_client`): every request a client sends (PUT, GET, HEAD, LIST, DELETE,
multipart parts and completions, retries) and every answer it gets, body and header lines both
ways. ``up`` is what the neuron sends, ``down`` what it receives; ``body_up`` and ``body_down``
are the bodies alone (a PUT's object, a GET's object, a LIST's XML, an error's XML). TCP and TLS
framing are not counted; a body cut off mid-read counts nothing. Stores without HTTP (the
in-memory store of the unit tests) are counted at the store layer, bodies only.

:func:`ddp_ring_bytes` is the baseline the figures are compared with: data-parallel training
that all-reduces fp32 gradients every step with a ring all-reduce.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from subnet.storage.base import ObjectInfo, ObjectStore


@dataclass
class ByteMeter:
    """Bytes sent (``up``) and received (``down``) since the last :meth:`take`. Thread-safe.

    ``up``/``down`` are totals (bodies plus request and status lines and headers);
    ``body_up``/``body_down`` the bodies within them; ``requests`` the HTTP requests sent.
    """

    up: int = 0
    down: int = 0
    body_up: int = 0
    body_down: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(
        self, *, up: int = 0, down: int = 0, head_up: int = 0, head_down: int = 0, requests: int = 0
    ) -> None:
        """Count a transfer: ``up``/``down`` bodies, ``head_up``/``head_down`` header bytes."""
        with self._lock:
            self.body_up += up
            self.body_down += down
            self.up += up + head_up
            self.down += down + head_down
            self.requests += requests

    def take(self) -> dict[str, int]:
        """The counts since the last call (as metrics fields), and start counting anew."""
        with self._lock:
            out = {
                "bytes_up": self.up,
                "bytes_down": self.down,
                "body_bytes_up": self.body_up,
                "body_bytes_down": self.body_down,
                "requests": self.requests,
            }
            self.up = self.down = self.body_up = self.body_down = self.requests = 0
        return out


class CountingStore:
    """An :class:`ObjectStore` that forwards every call and counts its traffic on a meter.

    A store that can meter its own HTTP traffic (``attach_meter``, as ``S3Store`` does) is handed
    the meter and counts everything on the wire; any other store is counted here, bodies only.
    """

    def __init__(self, inner: ObjectStore, meter: ByteMeter) -> None:
        self.inner = inner
        self.meter = meter
        attach = getattr(inner, "attach_meter", None)
        self._on_wire = callable(attach)
        if self._on_wire:
            attach(meter)

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.inner.location

    def _count(self, **counts: int) -> None:
        if not self._on_wire:
            self.meter.add(**counts)

    def put(self, key: str, data: bytes) -> None:
        """Write, then count ``len(data)`` up (a failed write raises and counts nothing)."""
        self.inner.put(key, data)
        self._count(up=len(data))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Conditional write; the body is sent whether or not the key was free, so it counts."""
        written = self.inner.put_if_absent(key, data)
        self._count(up=len(data))
        return written

    def get(self, key: str, max_bytes: int) -> bytes:
        """Read, then count the body down."""
        data = self.inner.get(key, max_bytes)
        self._count(down=len(data))
        return data

    def head(self, key: str) -> ObjectInfo:
        """Metadata: no body (its headers count on the wire)."""
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Listing: its XML pages count on the wire."""
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        """No body (its headers count on the wire)."""
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


# --- the HTTP layer (botocore's event hooks; no boto3 import here) ------------------------------


def meter_client(client: Any, meter: ByteMeter) -> None:
    """Count every request a botocore S3 ``client`` sends and every answer it receives.

    A streamed GET body is not read here (that would consume it): the store counts it with
    :func:`count_body` once read. Every other answer's body botocore has already read.
    """
    events = client.meta.events
    events.register(
        "before-send.s3", partial(_on_send, meter), unique_id=f"beam-meter-send-{id(meter)}"
    )
    events.register(
        "after-call.s3", partial(_on_answer, meter), unique_id=f"beam-meter-answer-{id(meter)}"
    )


def count_body(meter: ByteMeter | None, nbytes: int) -> None:
    """Count a streamed response body of ``nbytes`` that was read in full."""
    if meter is not None:
        meter.add(down=nbytes)


def _header_bytes(first_line: str, headers: Any) -> int:
    """``first_line\\r\\n``, ``name: value\\r\\n`` per header, and the blank line."""
    return len(first_line) + 2 + sum(len(str(k)) + len(str(v)) + 4 for k, v in headers.items()) + 2


def _on_send(meter: ByteMeter, request: Any, **_: Any) -> None:
    """``before-send``: the request line, headers (with the Host line urllib3 adds) and body."""
    url = urlsplit(request.url)
    target = url.path + (f"?{url.query}" if url.query else "")
    headers = dict(request.headers.items())
    if not any(k.lower() == "host" for k in headers):
        headers["Host"] = url.netloc
    length = request.headers.get("Content-Length")
    body = request.body
    size = (
        int(length)
        if length is not None
        else (len(body) if isinstance(body, bytes | bytearray) else 0)
    )
    meter.add(
        up=size, head_up=_header_bytes(f"{request.method} {target} HTTP/1.1", headers), requests=1
    )
    return None  # never short-circuits the send


def _on_answer(meter: ByteMeter, http_response: Any, model: Any, **_: Any) -> None:
    """``after-call``: the status line and headers, and the body unless it is still streaming."""
    status = int(getattr(http_response, "status_code", 0) or 0)
    streaming = bool(getattr(model, "has_streaming_output", False)) and status < 300
    body = 0 if streaming else len(http_response.content or b"")
    meter.add(down=body, head_down=_header_bytes(f"HTTP/1.1 {status} OK", http_response.headers))


def ddp_ring_bytes(workers: int, params: int, steps: int, bytes_per_value: int = 4) -> int:
    """Bytes each worker sends (and, equally, receives) in ``steps`` ring all-reduces of a
    ``params``-value fp32 gradient: ``2 (n - 1) / n`` model sizes per step (Patarasuk and Yuan,
    2009). Zero for a single worker, which has nobody to talk to."""
    if workers < 1 or params < 0 or steps < 0:
        raise ValueError("workers >= 1, params >= 0 and steps >= 0")
    return round(steps * 2 * (workers - 1) / workers * params * bytes_per_value)
