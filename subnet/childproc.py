"""Child processes that cannot outlive the local stack.

Every child is started with ``PR_SET_PDEATHSIG`` on Linux, so even a ``kill -9`` of the parent
takes the children with it; a normal exit or Ctrl-C stops them in reverse order of start.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child, before exec: ask Linux to SIGTERM us when our parent dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    args: list[str], log_path: Path, env: Mapping[str, str | None] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``args`` with output appended to ``log_path``; it dies when this process dies.
    ``env`` adds to this process's environment (a value of None removes the variable)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
            preexec_fn=die_with_parent,  # noqa: PLW1509 (no threads yet at spawn time)
        )


def stop(process: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGTERM, wait, then SIGKILL if needed; returns the exit code."""
    return stop_all([process], timeout)[0]


def stop_all(processes: list[subprocess.Popen[bytes]], timeout: float = 10.0) -> list[int | None]:
    """SIGTERM each process once, then wait for all; SIGKILL whoever outlives ``timeout``.

    One signal only: a second SIGTERM that lands while a Python child is already shutting down
    (its handlers reset) would kill it mid-cleanup.
    """
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    return [process.returncode for process in processes]
