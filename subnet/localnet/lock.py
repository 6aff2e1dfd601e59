"""One local stack per folder: a lock file with the owner's pid, and stale locks detected.

A second ``scripts/localnet.py`` on the same ``--root`` would re-stake, re-commit every bucket
to a new S3 server and overwrite ``endpoints.json`` under the running stack's neurons. The lock
makes it refuse instead, with a line naming the stack that runs. A lock whose process is gone
(killed with -9, a crash, a reboot) is stale and taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from loguru import logger

LOCK_NAME = "localnet.lock"


class StackRunning(RuntimeError):
    """Another live process holds the stack's lock; the message names it and how to stop it."""


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, but alive
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():  # a recycled pid running something else is not our stack
        with contextlib.suppress(OSError):
            data = cmdline.read_bytes()  # empty while the process is still starting up
            return not data or b"python" in data
    return True


class StackLock:
    """``root/localnet.lock``: created atomically, holding ``{"pid", "started", ...}``."""

    def __init__(self, root: str | Path) -> None:
        self.path = Path(root) / LOCK_NAME
        self.held = False

    def read(self) -> dict[str, Any]:
        """The lock's content ({} when absent or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> None:
        """Take the lock, or raise StackRunning naming the live owner; stale locks are replaced."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = self.read()
                pid = int(owner.get("pid") or 0)
                if pid != os.getpid() and _alive(pid):
                    raise StackRunning(_describe(self.path.parent, owner)) from None
                logger.warning("removing a stale local stack lock ({} is gone)", f"pid {pid}")
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                continue
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "started": time.time()}, f)
            self.held = True
            return
        raise StackRunning(f"could not take {self.path}; another stack is starting there")

    def update(self, **fields: Any) -> None:
        """Add what the running stack is (network, S3 endpoint) for the next one's message."""
        if self.held:
            self.path.write_text(json.dumps({**self.read(), **fields}))

    def release(self) -> None:
        """Remove the lock if this process holds it (idempotent)."""
        if self.held and int(self.read().get("pid") or 0) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.held = False


def _describe(root: Path, owner: dict[str, Any]) -> str:
    started = owner.get("started")
    when = time.strftime("%H:%M:%S", time.localtime(started)) if started else "?"
    where = f", chain {owner['network']}" if owner.get("network") else ""
    s3 = f", s3 {owner['s3_endpoint']}" if owner.get("s3_endpoint") else ""
    pid = owner.get("pid")
    return (
        f"a local stack is already running in {root} (pid {pid}, started {when}{where}{s3}); "
        f"use it (endpoints in {root / 'endpoints.json'}), stop it first (Ctrl-C in its "
        f"terminal, or kill -TERM {pid}), or start another with --root OTHER_FOLDER"
    )
