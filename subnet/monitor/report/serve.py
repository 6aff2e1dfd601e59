"""Serve the run page live on loopback, re-reading the run folder on every request."""

from __future__ import annotations

import ipaddress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from loguru import logger

from .html import render_page
from .load import load_run

PAGE_PATHS = ("/", "/index.html", "/report.html")


class RunPageServer(ThreadingHTTPServer):
    """A threading HTTP server that knows which run folder to render."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], run_dir: Path, refresh: int) -> None:
        self.run_dir = run_dir
        self.refresh = refresh
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """``http://host:port/`` for the bound address (the port is real even if 0 was asked)."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: RunPageServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        """The freshly rendered page for ``/``; 404 for anything else."""
        if self.path.split("?")[0] not in PAGE_PATHS:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        page = render_page(load_run(self.server.run_dir), refresh=self.server.refresh)
        body = page.encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (base signature)
        logger.debug("report server: {}", format % args)


def make_server(
    run_dir: str | Path, *, host: str = "127.0.0.1", port: int = 0, refresh: int = 5
) -> RunPageServer:
    """A bound (not yet serving) server; ``port=0`` picks a free port. Loopback hosts only."""
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the run page is served on loopback only, not {host!r}")
    return RunPageServer((host, port), Path(run_dir), refresh)
