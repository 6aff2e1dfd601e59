"""A heartbeat that notices when the whole machine stopped: a paused VM, a wall clock that jumped.

Multi-process runs are timed by the wall clock (a room run's round 0 is a unix time), so a machine
that stops for longer than a phase's headroom makes every member of every run miss the round it
stopped in, whatever Beam does; CI once saw every room miss its first round at once, each member
on time until then. ``Heartbeat`` wakes every ``period`` seconds in a thread of its own and
records each wake-up whose wall-clock gap exceeds ``period + limit`` (or runs backwards). A
sleeping thread is woken promptly on a loaded machine (the 13 room runs' 42 processes on 2 cores:
0.03 s late at worst), so the limit is far above load and far below the 26 s a room run's trainer
has in a round. The room runs run again when one occurred; any failed test's report lists them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """Records the wall-clock gaps between wake-ups longer than ``period + limit`` seconds."""

    def __init__(
        self, period: float = 0.5, limit: float = 5.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.period, self.limit, self.clock = period, limit, clock
        self.stalls: list[tuple[float, float]] = []  # (wall time it woke, seconds it lost)
        self.worst = 0.0  # the longest wake-up gap beyond the period, stalls or not
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        """Start beating in a thread of its own."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating; ``stalls`` and ``worst`` keep what was seen."""
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def beat(self, last: float) -> float:
        """One wake-up after ``last``: record a stall if it came late; the new ``last``."""
        now = self.clock()
        self.beats += 1
        lost = now - last - self.period
        self.worst = max(self.worst, lost)
        if lost > self.limit or now < last:
            self.stalls.append((round(now, 1), round(lost, 1)))
        return now

    def _run(self) -> None:
        last = self.clock()
        while not self._stop.wait(self.period):
            last = self.beat(last)
