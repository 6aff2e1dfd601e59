"""The schedule on its own: which step is due at which tick, table-driven, with no role, clock
or store (the hooks record what the schedule asks for)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from subnet.clock import WindowClock
from subnet.config import WindowConfig
from subnet.neuron.schedule import Cursor, Schedule
from subnet.neuron.steps import Gate, Step, never
from subnet.topology import StepPlan

# blocks=10: phases upload [0, 3], score [4, 5], merge [6, 9]
WINDOWS = WindowClock(WindowConfig(blocks=10, upload_deadline=4, report_deadline=6))
Ready = Callable[[Step], bool]


class Recorder:
    """Hooks that answer gates from a table and record every call, in order."""

    def __init__(self, ready: dict[str, Ready]) -> None:
        self.ready = ready
        self.events: list[str] = []

    def gate_ready(self, gate: str, step: Step) -> bool:
        return self.ready[gate](step)

    def handle(self, step: Step) -> object:
        self.events.append(f"{step}:{step.offset}")
        return None

    def save(self) -> None:
        self.events.append("save")

    def reread(self) -> None:
        self.events.append("reread")


def s(action: str, phase: str = "upload", *gates: str) -> StepPlan:
    return StepPlan(action, phase, None, gates, {})


GATES = {
    "slow": Gate("slow", lambda n, st: False),  # lapses at the phase's last offset
    "cond": Gate("cond", lambda n, st: False, never),  # a condition: never lapses
}
OPEN_AT_2: Ready = lambda st: st.offset >= 2  # noqa: E731
SHUT: Ready = lambda st: False  # noqa: E731


def play(steps: tuple[StepPlan, ...], ticks: list[int], ready: dict[str, Ready]) -> list[str]:
    """The steps run over ``ticks`` (``action@window:offset``), and how many windows closed."""
    schedule, hooks = Schedule(steps, WINDOWS, GATES), Recorder(ready)
    done = sum(schedule.tick(WINDOWS.window(t), WINDOWS.offset(t), hooks) for t in ticks)
    return [e for e in hooks.events if "@" in e] + [f"done={done}"]


CASES = {
    "a step runs once, at its phase's first tick": (
        (s("a"),),
        range(0, 20),
        {},
        ["a@0:0", "a@1:0", "done=2"],
    ),
    "a window joined past the phase is missed": ((s("a"),), [7, 8, 9, 12], {}, ["a@1:2", "done=1"]),
    "steps keep plan order, each in its phase": (
        (s("a"), s("b", "merge")),
        range(0, 10),
        {},
        ["a@0:0", "b@0:6", "done=1"],
    ),
    "one step per tick: the next looks at the clock again": (
        (s("a"), s("b")),
        range(0, 10),
        {},
        ["a@0:0", "b@0:1", "done=1"],
    ),
    "a missed step does not hold the next phase's": (
        (s("a"), s("b", "merge")),
        [7, 8],
        {},
        ["b@0:7", "done=1"],
    ),
    "a gate holds its step until it passes": (
        (s("a", "upload", "slow"),),
        range(0, 10),
        {"slow": OPEN_AT_2},
        ["a@0:2", "done=1"],
    ),
    "a gate that never passes lapses at the phase's end": (
        (s("a", "upload", "slow"),),
        range(0, 10),
        {"slow": SHUT},
        ["a@0:3", "done=1"],
    ),
    "a lapsing gate keeps plan order": (
        (s("a", "upload", "slow"), s("b")),
        range(0, 10),
        {"slow": OPEN_AT_2},
        ["a@0:2", "b@0:3", "done=1"],
    ),
    "a condition lets the next step of its phase run ahead; the held one is missed": (
        (s("a", "upload", "cond"), s("b"), s("c", "merge")),
        range(0, 10),
        {"cond": SHUT},
        ["b@0:0", "c@0:6", "done=1"],
    ),
    "a condition that comes true runs its step after those that ran ahead": (
        (s("a", "upload", "cond"), s("b"), s("c", "merge")),
        range(0, 10),
        {"cond": OPEN_AT_2},
        ["b@0:0", "a@0:2", "c@0:6", "done=1"],
    ),
    "nothing runs ahead across a phase": (
        (s("a", "upload", "cond"), s("b", "merge")),
        range(0, 10),
        {"cond": SHUT},
        ["b@0:6", "done=1"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_is_due(case: str) -> None:
    steps, ticks, ready, expected = CASES[case]
    assert play(steps, list(ticks), ready) == expected


def test_membership_is_reread_once_per_window_at_an_idle_tick() -> None:
    schedule, hooks = Schedule((s("a"),), WINDOWS, GATES), Recorder({})
    for tick in range(0, 12):
        schedule.tick(WINDOWS.window(tick), WINDOWS.offset(tick), hooks)
    # the step first (due at offset 0), the re-read at the next idle tick; again in window 1
    assert hooks.events == ["a@0:0", "save", "reread", "a@1:0", "save", "reread"]


def test_a_stale_roster_is_reread_right_before_the_step() -> None:
    schedule, hooks = Schedule((s("a"),), WINDOWS, GATES), Recorder({})
    schedule.tick(0, 0, hooks)
    hooks.events.clear()
    schedule.tick(3, 0, hooks)  # windows 1 and 2 never seen
    assert hooks.events == ["reread", "a@3:0", "save"]


def test_the_cursor_round_trips_through_its_record() -> None:
    schedule, hooks = (
        Schedule((s("a", "upload", "cond"), s("b")), WINDOWS, GATES),
        Recorder({"cond": SHUT}),
    )
    schedule.tick(0, 0, hooks)  # b ran ahead; a is held
    record = schedule.cursor.state_dict()
    assert record == {"last_window": -1, "cursor": [0, 0], "ahead": [1]}
    restored = Cursor()
    restored.load_state_dict(record)
    assert restored == Cursor(last_window=-1, window=0, index=0, ahead=frozenset({1}))
    assert restored.refreshed == -1  # not kept: a restart re-reads membership
