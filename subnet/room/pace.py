"""A room run's tick length, fitted to its work while it runs, and agreed through the manifest.

A room has no chain: its ticks are wall-clock ticks from the run's origin
(:class:`~subnet.clock.ticks.TimeClock`). A tick length chosen once at the start fits the
machines only as they were then; a laptop that gets busy makes every member late. So the owner
may change the tick length during the run, the way a local subnet's pacemaker changes simnet's
block time (:mod:`subnet.localnet.pacemaker` decides how long; this module carries it out):

* a change is a :class:`~subnet.room.manifest.PaceChange` appended to the run's record in a new
  manifest version, signed by the owner, so every member reads the same changes;
* it takes effect at the start of a window at least ``LEAD_WINDOWS`` ahead: members re-read the
  manifest once a window, so each holds the change before its tick comes, and no window changes
  length while it runs;
* one change is pending at a time, and a published change is never edited (a member may hold it
  already); the next waits until the pending one has taken effect.

Members follow with :func:`follow`, which also logs each change they see.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from loguru import logger

from ..clock.ticks import TimeClock
from . import ops
from .errors import RoomError
from .store import RoomStore

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch
    from .membership import RoomMembership

LEAD_WINDOWS = 2


def change_tick(now: int, window_ticks: int, last_change: int | None) -> int | None:
    """The tick a change asked for at tick ``now`` takes effect at: the start of the window
    ``LEAD_WINDOWS`` after the current one; None while an earlier change is still pending."""
    if last_change is not None and last_change > now:
        return None
    return (max(now, 0) // window_ticks + LEAD_WINDOWS) * window_ticks


class RoomPace:
    """The owner's side: publish the tick length a pacemaker asks for (its ``apply``)."""

    def __init__(
        self,
        rooms: Callable[[], RoomStore],
        owner: Signer,
        run: str,
        seconds: float,
        origin: float,
        window_ticks: int,
    ) -> None:
        self.rooms, self.owner, self.run = rooms, owner, run
        self.window_ticks = window_ticks
        self.changes: list[tuple[int, float]] = []  # published: (tick, seconds)
        self.clock = TimeClock(seconds, origin, pace=lambda: self.changes)

    def __call__(self, seconds: float) -> None:
        """Make ``seconds`` the run's tick length as soon as the rules allow (a no-op while a
        change is pending or when the last one is within 2 %); RoomError or StorageError if the
        manifest could not be written (the pacemaker asks again at its next poll)."""
        last = self.changes[-1] if self.changes else None
        current = last[1] if last else self.clock.base
        if math.isclose(seconds, current, rel_tol=0.02):
            return
        tick = change_tick(self.clock.now(), self.window_ticks, last[0] if last else None)
        if tick is None:
            return
        try:
            ops.add_pace(self.rooms(), self.owner, self.run, tick, round(seconds, 3))
        except RoomError as error:
            if error.reason != "conflict":
                raise
            logger.debug("room pace: manifest changed meanwhile; again at the next poll")
            return
        self.changes.append((tick, round(seconds, 3)))
        logger.info(
            "room pace: ticks last {:.2f} s from tick {} (window {}), {:.2f} s before",
            seconds,
            tick,
            tick // self.window_ticks,
            current,
        )


def follow(membership: RoomMembership) -> Callable[[], list[tuple[int, float]]]:
    """A member's side: the run's pace changes as its last manifest read lists them, for a
    :class:`TimeClock`; each new change is logged once."""
    seen: list[tuple[int, float]] = []

    def pace() -> list[tuple[int, float]]:
        changes = membership.run.pace_changes()
        for tick, seconds in changes[len(seen) :]:
            logger.info("room pace: from tick {} a tick lasts {:.2f} s", tick, seconds)
        seen[:] = changes
        return changes

    return pace
