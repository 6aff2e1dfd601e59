"""A fault-injecting HTTP proxy on loopback, between Beam's neurons and the S3 server.

Every request is forwarded to the real server (moto) over HTTP; a seeded random share of them is
spoiled on the way: `error` answers 500 InternalError *after* forwarding (so the write may have
landed: the worst case for retries), `reset` forwards and then drops the connection without an
answer, `stall` holds the request for `stall_s` seconds first. Counts of what it did are kept
for the benchmark record.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

INTERNAL_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
    b"<Message>injected by the fault proxy</Message></Error>"
)
_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class FaultRates:
    """Share of requests spoiled per fault kind (0..1 each)."""

    error: float = 0.05
    reset: float = 0.05
    stall: float = 0.03
    stall_s: float = 4.0


class FaultProxy:
    """`with FaultProxy(upstream, FaultRates()) as proxy:` and point clients at `proxy.url`."""

    def __init__(self, upstream: str, rates: FaultRates, seed: int = 0) -> None:
        self.upstream = urlsplit(upstream)
        self.rates = rates
        self.enabled = threading.Event()
        self.enabled.set()
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _fault(self) -> str:
        if not self.enabled.is_set():
            return "none"
        with self._lock:
            x = self._rng.random()
        r = self.rates
        for name, share in (("error", r.error), ("reset", r.reset), ("stall", r.stall)):
            if x < share:
                return name
            x -= share
        return "none"

    def _forward(self, method: str, path: str, headers: dict[str, str], body: bytes):
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
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
                fault = proxy._fault()
                with proxy._lock:
                    proxy.counts[fault] += 1
                    proxy.counts["requests"] += 1
                if fault == "stall":
                    time.sleep(proxy.rates.stall_s)
                status, out_headers, out_body = proxy._forward(
                    self.command, self.path, headers, body
                )
                if fault == "reset":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault == "error":
                    status, out_headers, out_body = 500, [], INTERNAL_ERROR
                try:
                    self.send_response(status)
                    for name, value in out_headers:
                        if name.lower() not in _HOP:
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(out_body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(out_body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first

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
