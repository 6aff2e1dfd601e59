"""simnet's HTTP server: JSON requests on loopback, a block timer, clean shutdown.

Protocol: ``POST /`` with ``{"method": M, "params": {...}}``; the reply is
``{"result": ...}`` or ``{"error": "..."}``. Methods are the reads and writes of
:class:`~subnet.chain.simnet.chain.SimChain`; the ``admin_*`` ones are the local stack's sudo
and the server refuses to bind anywhere but loopback.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loguru import logger

from .chain import SimChain
from .state import ChainState

MAX_REQUEST_BYTES = 4 * 1024 * 1024


def _dispatch(chain: SimChain, method: str, p: dict[str, Any]) -> Any:
    if method in ("query", "query_map", "runtime", "constant"):
        return chain.read(method, p["module"], p["name"], p.get("params"), p.get("block"))
    if method == "info":
        block = chain.state.block
        return {
            "genesis": chain.genesis,
            "block": block,
            "block_hash": chain.block_hash(block),
            "block_time": chain.block_time,
        }
    if method == "block_hash":
        return chain.block_hash(int(p["block"]))
    if method == "next_nonce":
        return chain.state.next_nonce(p["account"])
    if method == "submit":
        return chain.submit(p["call"], p["signer"], int(p["nonce"]), p["signature"])
    admin = {
        "admin_create_subnet": lambda: chain.create_subnet(
            int(p["netuid"]), p["owner_coldkey"], p["owner_hotkey"], p.get("hparams")
        ),
        "admin_set_hparams": lambda: chain.set_hparams(int(p["netuid"]), p["hparams"]),
        "admin_fund": lambda: chain.fund(p["coldkey"], int(p["rao"])),
        "admin_step": lambda: chain.step(int(p.get("blocks", 1))),
        "admin_set_block_time": lambda: chain.set_block_time(float(p["seconds"])),
        "admin_refresh_permits": lambda: chain.refresh_permits(int(p["netuid"])),
        "admin_stats": lambda: {"unanswered": dict(chain.unanswered), "block": chain.state.block},
    }
    if method in admin:
        return admin[method]()
    raise KeyError(f"unknown method {method!r}")


class _Handler(BaseHTTPRequestHandler):
    server: SimnetServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._reply(413, {"error": "request too large"})
            return
        try:
            request = json.loads(self.rfile.read(length))
            result = _dispatch(self.server.chain, request["method"], request.get("params") or {})
        except (KeyError, ValueError, TypeError) as error:
            self._reply(400, {"error": f"{type(error).__name__}: {error}"})
            return
        self._reply(200, {"result": result})

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.trace("simnet http: " + format, *args)


class SimnetServer(ThreadingHTTPServer):
    """The simnet process: state file + HTTP endpoint + block timer."""

    daemon_threads = True

    def __init__(
        self,
        db_path: str | Path,
        host: str = "127.0.0.1",
        port: int = 9945,
        block_time: float = 1.0,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"simnet binds only to loopback addresses, not {host}")
        self.chain = SimChain(ChainState(db_path), block_time=block_time)
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        """The ``sim://host:port`` network string neurons pass to ``--subtensor.network``."""
        host, port = self.server_address[:2]
        return f"sim://{host}:{port}"

    def start_blocks(self) -> None:
        """Advance one block every ``block_time`` seconds in a background thread (0 = manual)."""
        if self.chain.block_time <= 0:
            return

        def tick() -> None:
            while not self._stop.wait(self.chain.block_time):
                self.chain.step()

        self._timer = threading.Thread(target=tick, name="simnet-blocks", daemon=True)
        self._timer.start()

    def close(self) -> None:
        """Stop the timer, the HTTP loop and the database."""
        self._stop.set()
        self.shutdown()
        self.server_close()
        if self._timer is not None:
            self._timer.join(timeout=5)
        self.chain.state.close()
