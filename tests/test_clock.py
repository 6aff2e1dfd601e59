"""The Clock seam: manual and time clocks tick as documented; windows are arithmetic over ticks."""

from __future__ import annotations

import pytest
from loguru import logger

from subnet.clock import BlockClock, ManualClock, TimeClock, WindowClock
from subnet.clock.block import drand_round_after
from subnet.config import WindowConfig


def test_window_phases_split_the_window_in_order():
    clock = WindowClock(WindowConfig(start_block=5, blocks=30, upload_deadline=18,
                                     report_deadline=24))  # fmt: skip
    assert [clock.phase(p) for p in ("upload", "score", "merge")] == [(0, 17), (18, 23), (24, 29)]
    # A commit-reveal lane's writers reveal after the deadline tick (when the readers' snapshot
    # of the commits closes) and a guard tick, to the end of the score phase.
    assert clock.phase("reveal") == (20, 23)
    assert (clock.window(4), clock.window(5), clock.window(35), clock.offset(36)) == (-1, 0, 1, 1)
    assert clock.start(2) == 65
    with pytest.raises(ValueError, match="unknown phase"):
        clock.phase("train")


def test_the_reveal_deadline_defaults_inside_the_score_phase():
    assert WindowConfig().reveal_by == 21  # 18 + max(3, 6 // 4)
    assert WindowConfig(blocks=100, upload_deadline=50, report_deadline=90).reveal_by == 60
    assert WindowConfig(blocks=10, upload_deadline=4, report_deadline=5).reveal_by == 5
    assert WindowConfig(reveal_deadline=23).reveal_by == 23
    for bad in (18, 20, 25):  # no tick of reveals after the guard tick, or past the reports
        with pytest.raises(ValueError, match="reveal_deadline"):
            WindowConfig(reveal_deadline=bad)


def test_manual_clock_hands_out_its_ticks_and_now_follows():
    clock = ManualClock([3, 3, 4])
    seen = [(tick, clock.now()) for tick in clock.ticks()]
    assert seen == [(3, 3), (3, 3), (4, 4)]
    clock.advance(9)
    assert clock.now() == 9


class FakeTime:
    """A time source that sleeping advances (no real waiting)."""

    def __init__(self, t: float) -> None:
        self.t = t
        self.slept: list[float] = []

    def time(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.t += seconds


def test_time_clock_ticks_on_boundaries_since_its_origin():
    fake = FakeTime(1000.5)
    clock = TimeClock(2.0, origin=1000.0, time_fn=fake.time, sleep=fake.sleep)
    assert clock.now() == 0
    ticks = clock.ticks()
    assert [next(ticks) for _ in range(3)] == [1, 2, 3]
    assert fake.slept == [1.5, 2.0, 2.0]  # to each boundary, never past it


def test_time_clock_skips_to_the_newest_tick_after_a_long_step():
    fake = FakeTime(0.0)
    clock = TimeClock(1.0, time_fn=fake.time, sleep=fake.sleep)
    ticks = clock.ticks()
    assert next(ticks) == 1
    fake.t += 10  # the consumer worked for 10 ticks: now at 11.0
    assert next(ticks) == 11  # the head, not 2, 3, ... 11 one by one
    assert fake.slept[-1] == 0.0


def test_a_paced_time_clock_changes_tick_length_where_its_changes_say():
    fake = FakeTime(100.0)
    changes: list[tuple[int, float]] = []
    clock = TimeClock(1.0, origin=100.0, pace=lambda: changes, time_fn=fake.time, sleep=fake.sleep)
    changes.append((10, 3.0))  # ticks 10, 11, ... last 3 s: tick 10 starts at 110, 11 at 113
    assert [clock.start_of(t) for t in (0, 9, 10, 11, 12)] == [100, 109, 110, 113, 116]
    fake.t = 112.5
    assert (clock.now(), clock.position(), clock.seconds) == (10, 10.833333333333334, 3.0)
    ticks = clock.ticks()
    assert next(ticks) == 11 and fake.slept[-1] == 0.5  # to 113, the boundary of the new length
    assert next(ticks) == 12 and fake.slept[-1] == 3.0
    changes.append((12, 0.5))  # a later change applies after the first (tick 12 at 116)
    assert [clock.start_of(t) for t in (12, 13, 14)] == [116, 116.5, 117]
    fake.t = 99.0  # before the origin: negative ticks of the first length
    assert (clock.now(), clock.seconds) == (-1, 1.0)


def test_a_paced_clock_ignores_a_change_out_of_order():
    clock = TimeClock(2.0, pace=lambda: [(5, 1.0), (5, 9.0), (3, 9.0), (6, 0.0)])
    assert clock.segments() == [(0, 0.0, 2.0), (5, 10.0, 1.0)]


def test_time_clock_refuses_a_tick_of_no_length():
    with pytest.raises(ValueError):
        TimeClock(0)


def test_block_clock_follows_the_head_only():
    class Chain:
        def __init__(self):
            self.calls = []

        def block(self):
            return 41

        def follow_blocks(self, *, latest_only=False):
            self.calls.append(latest_only)
            yield from (42, 45)

    chain = Chain()
    clock = BlockClock(chain)
    assert clock.now() == 41 and list(clock.ticks()) == [42, 45] and chain.calls == [True]


class _Beacons:
    """A chain's reads a block clock's beacon makes (pure logic; the real chain is in
    ``tests/chain/test_chain_simnet_flow.py``)."""

    def __init__(self, schedule=(1000, 3), stored=10):
        self.schedule, self.stored, self.reads = schedule, stored, 0

    def block(self):
        return 50

    def block_hash(self, block):
        return f"0xhash{block}"

    def block_timestamp(self, block):
        return 1000 + 12 * block + 0.5  # round r is out at 1000 + 3 (r - 1)

    def drand_schedule(self):
        return self.schedule

    def drand_randomness(self, number):
        self.reads += 1
        return f"{number:04x}" if number <= self.stored else None


def test_drand_round_after_is_the_first_round_out_after_the_block():
    assert drand_round_after(1000.0, 1000, 3) == 2  # round 1 is out at 1000 itself
    assert drand_round_after(1002.9, 1000, 3) == 2
    assert drand_round_after(1003.0, 1000, 3) == 3
    assert drand_round_after(10.0, 1000, 3) == 1  # before drand's genesis


def test_block_clock_beacon_is_the_drand_pulse_after_the_block_once_stored():
    chain = _Beacons(stored=10)
    clock = BlockClock(chain)
    # block 2 was made at 1024.5: round 10 (out at 1027) is the first after it
    assert clock.beacon(2) == "drand-10-000a"
    assert clock.beacon(3) is None  # round 14 not stored yet: no beacon, asked again later
    chain.stored = 14
    assert clock.beacon(3) == "drand-14-000e"
    reads = chain.reads
    assert clock.beacon(2) == "drand-10-000a" and chain.reads == reads  # kept, never re-read
    assert clock.beacon(51) is None  # a block not made yet


def test_block_clock_beacon_falls_back_to_the_block_hash_without_drand():
    clock = BlockClock(_Beacons(schedule=None))
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        assert clock.beacon(7) == "0xhash7" and clock.beacon(8) == "0xhash8"
    finally:
        logger.remove(sink)
    assert sum("stores no drand pulses" in line for line in lines) == 1
