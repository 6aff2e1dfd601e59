"""Run moto's standalone S3 server as a subprocess: a real S3 endpoint over HTTP on 127.0.0.1.

Used by the tests, the local demo and the localnet script, so the code under test speaks real S3
over a real socket. Usage::

    with MotoServer() as server:
        config = StorageConfig(bucket="beam", endpoint_url=server.endpoint_url)
        ...

moto accepts any access key pair; `server.environ()` gives dummy ones for the default variables.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

DUMMY_ACCESS_KEY_ID = "beam-local-key"
DUMMY_SECRET_ACCESS_KEY = "beam-local-secret"


class LocalServerError(RuntimeError):
    """The local S3 server could not be started."""


class _ExitedAtStart(LocalServerError):
    """moto exited before answering: most often its port was taken in the meantime."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """A `moto_server` subprocess. `start()` returns once it answers HTTP; `stop()` ends it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        log_path: Path | None = None,
        start_timeout_s: float = 120.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Configure (not start) a server; `port=None` picks a free one at `start()`.

        `start_timeout_s` only bounds a hang (an exit is seen at once), so it is long: a busy
        machine can take tens of seconds to start the server. `env` adds variables for the
        subprocess, e.g. `{"INITIAL_NO_AUTH_ACTION_COUNT": "3"}` makes moto enforce IAM
        credentials after the first three requests.
        """
        self.env = dict(env or {})
        self.host = host
        self.port = port
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """`http://host:port`, for `StorageConfig.endpoint_url`."""
        if self.port is None:
            raise LocalServerError("the server has not been started")
        return f"http://{self.host}:{self.port}"

    def environ(self) -> dict[str, str]:
        """Dummy credentials under the default variable names (moto accepts any)."""
        return {
            "BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
            "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        }

    def start(self) -> str:
        """Start the subprocess and wait until it answers; returns `endpoint_url`.

        A port picked here was free a moment ago; if another process took it before moto bound
        it (parallel test workers do), moto exits and a new port is picked, up to three times.
        """
        if self._process is not None:
            return self.endpoint_url
        if self.port is not None:
            return self._start_on(self.port)
        for _ in range(2):
            with contextlib.suppress(_ExitedAtStart):
                return self._start_on(free_port(self.host))
        return self._start_on(free_port(self.host))  # the third try raises what it meets

    def _start_on(self, port: int) -> str:
        self.port = port
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                stdout=log,
                stderr=log,
                env={**os.environ, **self.env},
            )
        finally:
            if self.log_path:
                log.close()  # type: ignore[union-attr]  # the child keeps its own handle
        self._wait_ready()
        return self.endpoint_url

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset API), keeping the process running."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        """Terminate the subprocess (kill it if it ignores SIGTERM for 5 s)."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise _ExitedAtStart(f"moto server exited with code {code} during start")
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise LocalServerError(f"moto server at {self.endpoint_url} did not answer in time")

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
