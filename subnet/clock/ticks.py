"""The ``Clock`` seam: where a neuron's ticks come from.

A clock says what tick it is now and yields new ticks as they come. ``BaseNeuron.run`` is the
only consumer of ``ticks()``; everything else asks ``now()``. Subnet mode injects a
:class:`~subnet.clock.block.BlockClock` (chain blocks), a room a :class:`TimeClock`, a unit test
a :class:`ManualClock`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
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
    """Wall-clock ticks of ``seconds`` each since ``origin`` (unix time), for runs without a chain.

    Members agree on the tick as far as their clocks agree; windows many ticks long make a
    second of skew harmless.
    """

    def __init__(
        self,
        seconds: float,
        origin: float = 0.0,
        *,
        time_fn: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if seconds <= 0:
            raise ValueError(f"tick length must be positive, got {seconds}")
        self.seconds, self.origin = float(seconds), float(origin)
        self._time, self._sleep = time_fn, sleep

    def now(self) -> int:
        """Whole ticks since the origin."""
        return int((self._time() - self.origin) // self.seconds)

    def ticks(self) -> Iterator[int]:
        """Sleep to each tick boundary and yield the tick reached."""
        last = self.now()
        while True:
            boundary = self.origin + (last + 1) * self.seconds
            self._sleep(max(0.0, boundary - self._time()))
            tick = self.now()
            if tick > last:
                last = tick
                yield tick
