"""A deadline for a whole object transfer, not just for each socket read.

botocore's `read_timeout` bounds each read of the socket, so an endpoint that sends one byte every
few seconds, or that never answers and lets every retry time out, holds a caller for minutes. A
`Deadline` bounds everything one `ObjectStore` call does (every attempt, every backoff, the body):
a fixed allowance for the request plus the time the object's size needs at a minimum rate.

`run_bounded` runs one attempt in a worker thread and stops waiting when the deadline passes,
calling the abort hooks the attempt registered (e.g. shutting down the socket of a body being
read), so the worker ends soon after instead of draining a drip-feed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """The call ran past its deadline; the transfer was abandoned."""


class Deadline:
    """When a call must be done by; `allow(bytes)` extends it once a size is known."""

    def __init__(self, seconds: float, *, min_rate_bytes_s: float) -> None:
        self.seconds = seconds
        self.min_rate = min_rate_bytes_s
        self._end = time.monotonic() + seconds
        self._aborts: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def allow(self, nbytes: int) -> None:
        """Add the time `nbytes` take at the minimum rate (call once per transfer)."""
        with self._lock:
            self._end += max(0, nbytes) / self.min_rate

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        with self._lock:
            return self._end - time.monotonic()

    def on_abort(self, hook: Callable[[], None]) -> None:
        """Call `hook` if the deadline passes while the attempt is still running."""
        with self._lock:
            self._aborts.append(hook)

    def abort(self) -> None:
        """Run and forget the abort hooks (each is best effort)."""
        with self._lock:
            hooks, self._aborts = self._aborts, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # aborting a dead transfer must never fail the caller
                pass


def run_bounded(fn: Callable[[], T], deadline: Deadline) -> T:
    """`fn()` in a worker thread; its result or exception, or `DeadlineExceeded` when late."""
    if deadline.remaining() <= 0:
        raise DeadlineExceeded(f"no time left of {deadline.seconds:.0f}s")
    box: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the waiting thread as is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="beam-storage-call", daemon=True).start()
    # The worker may extend the deadline (once the size is known), so wait in slices.
    while not done.wait(max(0.0, min(deadline.remaining(), 1.0))):
        if deadline.remaining() <= 0:
            deadline.abort()
            raise DeadlineExceeded(
                f"not done within {deadline.seconds:.0f}s plus its size allowance"
            )
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
