"""The ``Clock`` seam: where a neuron's ticks come from.

A clock says what tick it is now and yields new ticks as they come. ``BaseNeuron.run`` is the
only consumer of ``ticks()``; everything else asks ``now()``. Subnet mode injects a
:class:`~subnet.clock.block.BlockClock` (chain blocks), a room a :class:`TimeClock`, a unit test
a :class:`ManualClock`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol


class Clock(Protocol):
    """A source of ticks shared by every member of a run."""

    def now(self) -> int:
        """The current tick."""
        ...

    def ticks(self) -> Iterator[int]:
        """Yield each new tick; a consumer that fell behind gets the newest, not the missed ones."""
        ...


class ManualClock:
    """Ticks a test hands out: a fixed sequence, or whatever :meth:`advance` sets."""

    def __init__(self, ticks: Iterable[int] = (), start: int = 0) -> None:
        self._queue = list(ticks)
        self.head = start

    def now(self) -> int:
        """The tick last handed out (or set)."""
        return self.head

    def advance(self, to: int) -> None:
        """Set the current tick (for code that only asks :meth:`now`)."""
        self.head = to

    def ticks(self) -> Iterator[int]:
        """The queued ticks, in order (replays and repeats included: the consumer copes)."""
        while self._queue:
            self.head = self._queue.pop(0)
            yield self.head


class TimeClock:
    """Wall-clock ticks since ``origin`` (unix time), for runs without a chain.

    Ticks last ``seconds`` each, until a change ``pace()`` lists: ``(tick, seconds)`` pairs in
    tick order, each saying that from that tick on a tick lasts ``seconds`` (a room's owner
    fits the ticks to the work measured in the run, ahead of time, and every member reads the
    same changes from the room's manifest). Members agree on the tick as far as their clocks
    and their copies of the changes agree; windows many ticks long make a second of skew
    harmless.
    """

    def __init__(
        self,
        seconds: float,
        origin: float = 0.0,
        *,
        pace: Callable[[], Sequence[tuple[int, float]]] | None = None,
        time_fn: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if seconds <= 0:
            raise ValueError(f"tick length must be positive, got {seconds}")
        self.base, self.origin = float(seconds), float(origin)
        self._pace = pace or (lambda: ())
        self._time, self._sleep = time_fn, sleep

    def segments(self) -> list[tuple[int, float, float]]:
        """``(first tick, its unix start time, seconds per tick)`` of each stretch of equal
        ticks, in order; a change that does not follow the previous one is ignored."""
        out = [(0, self.origin, self.base)]
        for tick, seconds in self._pace():
            first, start, length = out[-1]
            if tick > first and seconds > 0:
                out.append((tick, start + (tick - first) * length, float(seconds)))
        return out

    def position(self, at: float | None = None) -> float:
        """Ticks since the origin at unix time ``at`` (default: now), with the fraction."""
        t = self._time() if at is None else at
        segments = self.segments()
        first, start, length = next((s for s in reversed(segments) if s[1] <= t), segments[0])
        return first + (t - start) / length

    def start_of(self, tick: int) -> float:
        """The unix time ``tick`` begins."""
        first, start, length = next(
            (s for s in reversed(self.segments()) if s[0] <= tick), self.segments()[0]
        )
        return start + (tick - first) * length

    @property
    def seconds(self) -> float:
        """The length of the current tick."""
        t, segments = self._time(), self.segments()
        return next((s for s in reversed(segments) if s[1] <= t), segments[0])[2]

    def now(self) -> int:
        """Whole ticks since the origin."""
        return math.floor(self.position())

    def ticks(self) -> Iterator[int]:
        """Sleep to each tick boundary and yield the tick reached."""
        last = self.now()
        while True:
            self._sleep(max(0.0, self.start_of(last + 1) - self._time()))
            tick = self.now()
            if tick > last:
                last = tick
                yield tick
