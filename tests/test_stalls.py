"""The room runs' heartbeat: a wake-up far past its period, or before the last one, is a stall."""

from __future__ import annotations

import time

from stalls import Heartbeat


def test_late_or_backwards_wake_ups_are_stalls_and_load_is_not():
    times = iter([10.6, 11.3, 40.0, 39.0, 39.5])
    beat = Heartbeat(period=0.5, limit=5.0, clock=lambda: next(times))
    last = 10.0
    for _ in range(5):
        last = beat.beat(last)
    # 0.1 s and 0.2 s late (load): nothing; 28.2 s late: a stall; the clock going back: a stall
    assert beat.stalls == [(40.0, 28.2), (39.0, -1.5)]
    assert beat.worst == 28.2


def test_a_quiet_machine_records_nothing():
    with Heartbeat(period=0.01, limit=5.0) as beat:
        while beat.beats < 3:
            time.sleep(0.01)
    assert beat.stalls == [] and 0.0 <= beat.worst < 5.0
