"""Storage fixtures: a fresh bucket per test on the session's moto server, and a fault proxy."""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from subnet.storage.config import StorageConfig
from subnet.storage.local_server import MotoServer
from subnet.storage.s3 import S3Store

_bucket_ids = itertools.count()

INTERNAL_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
    b"<Message>injected by the fault proxy</Message></Error>"
)


def make_config(endpoint: str, bucket: str, **overrides: object) -> StorageConfig:
    """Test settings: small backoff so retries stay fast, small multipart threshold."""
    settings: dict[str, object] = {
        "bucket": bucket,
        "endpoint_url": endpoint,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "multipart_threshold_bytes": 8 * 1024 * 1024,
        "multipart_part_bytes": 5 * 1024 * 1024,
    }
    settings.update(overrides)
    return StorageConfig.model_validate(settings)


@pytest.fixture
def config_for() -> Callable[..., StorageConfig]:
    """`make_config(endpoint, bucket, **overrides)`, for tests that build stores by hand."""
    return make_config


@pytest.fixture
def bucket_name() -> str:
    """A bucket name unique within the session."""
    return f"beam-test-{next(_bucket_ids)}"


MakeStore = Callable[..., S3Store]


@pytest.fixture
def make_store(moto_server: MotoServer, bucket_name: str) -> MakeStore:
    """Build an `S3Store`: `make_store(endpoint=..., bucket=..., create=True, **config_overrides)`.

    Defaults: the session's moto server and this test's bucket, created if `create`.
    """

    def build(
        *, endpoint: str | None = None, bucket: str | None = None, create: bool = True, **overrides
    ) -> S3Store:
        config = make_config(
            endpoint or moto_server.endpoint_url, bucket or bucket_name, **overrides
        )
        s3 = S3Store.from_config(config, moto_server.environ())
        if create:
            s3.ensure_bucket()
        return s3

    return build


@pytest.fixture
def store(make_store: MakeStore) -> S3Store:
    """An `S3Store` on a new, empty bucket of the session's moto server."""
    return make_store()


class FaultProxy:
    """A reverse proxy to the moto server that spoils the next requests on demand.

    Every request really reaches moto over HTTP. Faults, consumed one per request:
    `"500"` forwards the request and then answers 500 InternalError instead of moto's answer
    (so the write may have happened: the worst case for retries); `"timeout"` forwards it and
    answers only after `delay_s`, after the client has given up.
    """

    def __init__(self, upstream: str, delay_s: float = 1.0) -> None:
        self.upstream = urlsplit(upstream)
        self.delay_s = delay_s
        self.faults: list[str | None] = []  # None: let that request through untouched
        self.arrived: list[str] = []  # method of every request, as it arrives
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status) once answered
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(self, *faults: str | None) -> None:
        with self._lock:
            self.faults.extend(faults)

    def _next_fault(self) -> str | None:
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes):
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}
                proxy.arrived.append(self.command)
                fault = proxy._next_fault()
                status, out_headers, out_body = proxy._forward(
                    self.command, self.path, headers, body
                )
                if fault == "500":
                    status, out_headers, out_body = 500, [], INTERNAL_ERROR
                elif fault == "timeout":
                    time.sleep(proxy.delay_s)
                proxy.seen.append((self.command, self.path, status))
                try:
                    self.send_response(status)
                    for name, value in out_headers:
                        if name.lower() not in (
                            "content-length",
                            "transfer-encoding",
                            "connection",
                        ):
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(out_body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(out_body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up, as the fault intended

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fault_proxy(moto_server: MotoServer) -> Iterator[FaultProxy]:
    """A `FaultProxy` in front of the session's moto server."""
    with FaultProxy(moto_server.endpoint_url) as proxy:
        yield proxy
