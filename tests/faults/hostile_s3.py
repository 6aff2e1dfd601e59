"""A hostile S3 endpoint on loopback: speaks just enough S3 for boto3's GET and HEAD, badly.

Modes (set `server.mode`, or per key with `server.modes[key]`):

- `ok`: serve `server.objects[key]` honestly (404 NoSuchKey when absent);
- `drip`: an honest Content-Length, then one byte every `drip_s` seconds;
- `no_length`: HEAD without Content-Length; GET body without it (connection close);
- `no_modified`: HEAD and GET without Last-Modified;
- `bad_modified`: a Last-Modified that is not a date;
- `redirect`: every request is a 307 (or 301 with a region header) to itself, forever;
- `region_redirect`: a 301 PermanentRedirect naming another region, alternating, forever;
- `silent`: read the request, never answer (until the server stops).
"""

from __future__ import annotations

import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

NOT_FOUND = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code>'
    b"<Message>The specified key does not exist.</Message></Error>"
)


class HostileS3:
    """`with HostileS3() as s3:` then point an `S3Store` at `s3.endpoint_url`."""

    def __init__(self, mode: str = "ok", drip_s: float = 0.5) -> None:
        self.mode = mode
        self.modes: dict[str, str] = {}
        self.drip_s = drip_s
        self.objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        s3 = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                path = urlsplit(self.path).path
                key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
                s3.requests.append((self.command, path))
                mode = s3.modes.get(key, s3.mode)
                try:
                    getattr(self, f"_{mode}")(key)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

            def _headers(self, status: int, body: bytes, *, length=True, modified="date") -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
                if modified == "date":
                    self.send_header("Last-Modified", formatdate(usegmt=True))
                elif modified == "bad":
                    self.send_header("Last-Modified", "yesterday-ish")
                if length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                self.end_headers()

            def _ok(self, key: str, **kw) -> None:
                body = s3.objects.get(key)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(NOT_FOUND)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(NOT_FOUND)
                    return
                self._headers(200, body, **kw)
                if self.command != "HEAD":
                    self.wfile.write(body)
                if not kw.get("length", True):
                    self.close_connection = True

            def _no_length(self, key: str) -> None:
                self._ok(key, length=False)

            def _no_modified(self, key: str) -> None:
                self._ok(key, modified="none")

            def _bad_modified(self, key: str) -> None:
                self._ok(key, modified="bad")

            def _drip(self, key: str) -> None:
                body = s3.objects.get(key, b"x" * 1000)
                self._headers(200, body)
                if self.command == "HEAD":
                    return
                for byte in body:
                    if s3.stopping.wait(s3.drip_s):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

            def _redirect(self, key: str) -> None:
                self.send_response(307)
                self.send_header("Location", f"{s3.endpoint_url}{self.path}")
                self.send_header("x-amz-bucket-region", "us-east-1")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _region_redirect(self, key: str) -> None:
                # What S3 says to a client in the wrong region; botocore follows it, and a server
                # that says it for every region sends the client round in circles.
                region = "eu-west-1" if len(s3.requests) % 2 else "us-east-1"
                body = (
                    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PermanentRedirect</Code>'
                    b"<Message>use the other region</Message><Endpoint>"
                    + s3.endpoint_url.encode()[7:]
                    + b"</Endpoint></Error>"
                )
                self.send_response(301)
                self.send_header("x-amz-bucket-region", region)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _silent(self, key: str) -> None:
                s3.stopping.wait(120)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler

    def __enter__(self) -> HostileS3:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        time.sleep(0.05)
