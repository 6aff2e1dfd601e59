"""simnet as a child process: start it on a free port, talk to its admin API, stop it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from ...childproc import spawn, stop
from .substrate import post


class SimnetProcess:
    """``python -m subnet.chain.simnet`` in a child process that dies with its parent."""

    def __init__(self, db: str | Path, log: str | Path, *, block_time: float = 1.0) -> None:
        self.db, self.log, self.block_time = Path(db), Path(log), block_time
        self.port: int | None = None
        self._process = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def network(self) -> str:
        """The ``--subtensor.network`` value for this chain."""
        return f"sim://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> SimnetProcess:
        """Spawn the server and wait until it has bound its port.

        A crash is seen at once; the timeout only bounds a hang, so it is long: on a busy
        machine (load 40 on 2 cores) a start ran past 30 s.
        """
        port_file = self.db.with_suffix(".port")
        port_file.unlink(missing_ok=True)
        self.db.parent.mkdir(parents=True, exist_ok=True)
        self._process = spawn(
            [
                sys.executable,
                "-m",
                "subnet.chain.simnet",
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--db",
                str(self.db),
                "--block-time",
                str(self.block_time),
            ],
            self.log,
        )
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text()):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"simnet did not start; see {self.log}")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        return self

    def admin(self, method: str, **params: Any) -> Any:
        """Call one of the server's methods (``admin_step``, ``admin_fund`` ...)."""
        return post(self.url, method, params)

    def step(self, blocks: int = 1) -> int:
        """Produce ``blocks`` blocks now; returns the new head."""
        return int(self.admin("admin_step", blocks=blocks))

    def stop(self) -> None:
        """Terminate the server (idempotent)."""
        if self._process is not None:
            stop(self._process)
            self._process = None
