"""A lockstep clock for running several neurons in threads: tick t is handed to every neuron
only once all of them asked for it (each finished everything it does at t - 1), so a run in
threads is as deterministic as one on manual clocks, with no wall-clock waits."""

from __future__ import annotations

import threading
from collections.abc import Iterator


class Lockstep:
    """The shared barrier: ``parties`` neurons advance tick by tick up to ``last``."""

    def __init__(self, parties: int, last: int) -> None:
        self.cond = threading.Condition()
        self.parties, self.last = parties, last
        self.waiting, self.tick = 0, -1

    def _advance(self) -> None:
        self.tick += 1
        self.waiting = 0
        self.cond.notify_all()

    def next(self) -> int:
        """Wait until every party asked; the tick they all get."""
        with self.cond:
            self.waiting += 1
            if self.waiting >= self.parties:
                self._advance()
                return self.tick
            current = self.tick
            self.cond.wait_for(lambda: self.tick > current, timeout=120)
            return self.tick

    def leave(self) -> None:
        """A party stopped (its stop rule, or an error): nobody waits for it any more."""
        with self.cond:
            self.parties -= 1
            if self.parties > 0 and self.waiting >= self.parties:
                self._advance()

    def clock(self) -> LockstepClock:
        """One party's clock."""
        return LockstepClock(self)


class LockstepClock:
    """A ``Clock`` whose ticks come from a shared :class:`Lockstep`."""

    def __init__(self, lockstep: Lockstep) -> None:
        self.lockstep, self.head = lockstep, -1

    def now(self) -> int:
        return self.head

    def ticks(self) -> Iterator[int]:
        while True:
            tick = self.lockstep.next()
            if tick > self.lockstep.last:
                return
            self.head = tick
            yield tick
