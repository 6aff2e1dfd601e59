"""The one loop: each planned step once per window in its phase, gates, failures contained,
resume exact. Runs on a manual clock, a static roster and a hand-built plan (no chain)."""

from __future__ import annotations

import pytest
import torch

from subnet.clock import ManualClock
from subnet.compression import state_digest
from subnet.config import BeamConfig, ProtocolConfig, WindowConfig
from subnet.errors import NotReady
from subnet.membership import Member, Roster, StaticMembership
from subnet.monitor import MetricsSink
from subnet.neuron import gates
from subnet.neuron.base import BaseNeuron
from subnet.neuron.rules import STOP_RULES
from subnet.neuron.runtime import Runtime
from subnet.node.entry import run_until_stopped
from subnet.storage.base import StorageError
from subnet.storage.memory import MemoryStore
from subnet.topology import RunPlan, SlotPlan, StepPlan

HOTKEY = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
# blocks=10: phases upload [0, 4), score [4, 6), merge [6, 10)
WINDOW = WindowConfig(blocks=10, upload_deadline=4, report_deadline=6)


class Signer:
    ss58_address = HOTKEY

    def sign(self, message: bytes) -> bytes:
        return bytes(64)


def plan(*steps: StepPlan) -> RunPlan:
    slot = SlotPlan("rec", "recorder", (1, None), frozenset(), frozenset(), steps)
    return RunPlan("@test/loop", "1.0.0", {}, {"rec": slot}, {}, "units", "assigned", {}, {},
                   {"rule": "never"}, "0" * 16)  # fmt: skip


def step(action: str = "work", phase: str = "upload", gates: tuple[str, ...] = ()) -> StepPlan:
    return StepPlan(action, phase, None, gates, {})


class Recorder(BaseNeuron):
    role = "recorder"

    def __init__(self, rt, fail_on: set[int] = frozenset()) -> None:
        super().__init__(rt)
        self.calls: list[tuple[str, int]] = []
        self.fail_on = fail_on
        self.weights = torch.zeros(4)

    def work(self, step):
        self.calls.append(("sync", step.window))
        if step.window in self.fail_on:
            raise StorageError("unavailable", endpoint="http://s3", bucket="b", detail="down")
        self.weights += step.window
        self.calls.append(("publish", step.window))
        return step.window

    def report(self, step):
        self.calls.append(("report", step.window))

    actions = {"work": work, "report": report}
    gates = gates.GATES  # the dict the tests below add gates to
    stop_rules = STOP_RULES

    def state(self):
        return {"note": "x"}, {"w": self.weights}

    def restore(self, meta, tensors):
        self.weights = tensors["w"].clone()


def runtime(tmp_path, ticks, run_plan: RunPlan | None = None) -> Runtime:
    cfg = BeamConfig(protocol=ProtocolConfig(window=WINDOW))
    roster = Roster((Member(HOTKEY, frozenset({"rec"})),))
    return Runtime(cfg=cfg, role="recorder", signer=Signer(), store=MemoryStore(),
                   membership=StaticMembership(roster), clock=ManualClock(ticks),
                   plan=run_plan or plan(step(phase="upload")),
                   metrics=MetricsSink(tmp_path / "metrics.jsonl"),
                   state_dir=tmp_path / "state")  # fmt: skip


def make(tmp_path, blocks, run_plan: RunPlan | None = None, **kw) -> Recorder:
    """A recorder whose one step runs in the upload phase (offsets 0..3)."""
    return Recorder(runtime(tmp_path, blocks, run_plan), **kw)


def test_each_window_once_at_its_phase(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)))
    assert neuron.run() == 3
    assert [c for c in neuron.calls if c[0] == "publish"] == [
        ("publish", 0),
        ("publish", 1),
        ("publish", 2),
    ]
    # the step ran at offset 2 of each window, never again in the same window
    assert neuron.calls.count(("sync", 1)) == 1


def test_window_joined_past_its_phase_is_skipped(tmp_path):
    neuron = make(tmp_path, [7, 8, 9, 12, 13])  # window 0 seen first at offset 7 > 5
    neuron.run()
    assert [c for c in neuron.calls if c[0] == "publish"] == [("publish", 1)]


def test_stale_replayed_blocks_are_skipped(tmp_path):
    neuron = make(tmp_path, [2, 2, 1, 3])
    assert neuron.run() == 1


def test_a_failed_window_is_logged_and_the_loop_goes_on(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)), fail_on={1})
    assert neuron.run() == 3
    assert [c for c in neuron.calls if c[0] == "publish"] == [("publish", 0), ("publish", 2)]
    assert '"reason": "unavailable"' in (tmp_path / "metrics.jsonl").read_text()


def test_resume_continues_without_repeating_a_window(tmp_path):
    first = make(tmp_path, list(range(0, 15)))
    first.run()  # handles windows 0 and 1, saves after each
    digest = state_digest({"w": first.weights}).hex()
    second = make(tmp_path, list(range(15, 30)))  # same state folder, a fresh process
    second.resume()
    assert second.last_window == 1
    assert state_digest({"w": second.weights}).hex() == digest
    second.run()
    assert [c for c in second.calls if c[0] == "publish"] == [("publish", 2)]


def test_stop_while_idle_interrupts_and_the_loop_does_not_resume_work(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)))
    with pytest.raises(KeyboardInterrupt):  # what a signal handler raises into a blocked wait
        neuron.stop()
    assert neuron.run() == 0


def test_a_stop_that_breaks_a_lock_in_the_wait_is_still_a_clean_stop(tmp_path, monkeypatch):
    """CPython can turn the handler's KeyboardInterrupt inside a Condition wait into
    `RuntimeError: cannot release un-acquired lock`; after a stop request the entry point's
    `run_until_stopped` treats it as the stop, and without one it propagates."""
    neuron = make(tmp_path, list(range(0, 30)))

    def broken_wait(*_args, **_kwargs):
        raise RuntimeError("cannot release un-acquired lock")

    monkeypatch.setattr(neuron, "run", broken_wait)
    with pytest.raises(RuntimeError, match="un-acquired"):
        run_until_stopped(neuron, None)  # no stop was asked for: a real error
    neuron.stop_event.set()
    run_until_stopped(neuron, None)  # a stop was asked for: returns


def test_stop_during_a_window_lets_it_finish_and_save(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)))
    original = Recorder.work

    def work_then_stop(self, st):
        if st.window == 1:
            self.stop()  # busy: must not raise
        return original(self, st)

    neuron.actions = {"work": work_then_stop}
    assert neuron.run() == 1 + 1  # windows 0 and 1; the loop ends at the next block
    assert neuron.state_file.load()[0]["last_window"] == 1


def test_steps_run_in_order_each_in_its_phase(tmp_path):
    two = plan(step("work", "upload"), step("report", "merge"))
    neuron = make(tmp_path, list(range(0, 20)), two)
    assert neuron.run() == 2
    assert neuron.calls == [("sync", 0), ("publish", 0), ("report", 0),
                            ("sync", 1), ("publish", 1), ("report", 1)]  # fmt: skip


def test_a_step_whose_phase_passed_is_missed_and_the_next_still_runs(tmp_path):
    two = plan(step("work", "upload"), step("report", "merge"))
    neuron = make(tmp_path, [7, 8, 12], two)  # window 0 joined in its merge phase
    assert neuron.run() == 1  # window 0 (its report ran); window 1 is still in progress
    assert neuron.calls == [("report", 0), ("sync", 1), ("publish", 1)]


def test_membership_is_refreshed_once_per_window_at_an_idle_tick(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)))
    at = []
    original = neuron.rt.membership.refresh
    neuron.rt.membership.refresh = lambda: at.append(neuron.rt.clock.now()) or original()
    neuron.run()
    assert at == [1, 11, 21]  # right after the step (due at offset 0), never in front of it


def test_a_stale_roster_is_refreshed_before_the_step(tmp_path):
    neuron = make(tmp_path, [0, 30])  # window 1 never seen: the roster is two windows old
    at = []
    original = neuron.rt.membership.refresh
    neuron.rt.membership.refresh = lambda: at.append(neuron.rt.clock.now()) or original()
    neuron.run()
    assert at == [30]


def test_a_gate_holds_a_step_until_it_passes(tmp_path, monkeypatch):
    opened = {"at": 2}
    monkeypatch.setitem(gates.GATES, "flag", gates.Gate(
        "flag", lambda n, s: n.rt.clock.now() % 10 >= opened["at"], None, "test flag"))  # fmt: skip
    neuron = make(tmp_path, list(range(0, 10)), plan(step(gates=("flag",))))
    seen = []
    original = neuron.handle
    neuron.handle = lambda st: seen.append(st.offset) or original(st)
    assert neuron.run() == 1
    assert seen == [2]  # not at offsets 0 and 1


def test_a_gate_that_never_passes_lapses_at_the_phase_end(tmp_path, monkeypatch):
    monkeypatch.setitem(gates.GATES, "never", gates.Gate("never", lambda n, s: False))
    neuron = make(tmp_path, list(range(0, 10)), plan(step(gates=("never",))))
    offsets = []
    original = neuron.handle
    neuron.handle = lambda st: offsets.append(st.offset) or original(st)
    assert neuron.run() == 1
    assert offsets == [3]  # the upload phase's last offset


def test_a_step_held_by_a_condition_lets_the_next_step_of_its_phase_go_first(tmp_path, monkeypatch):
    """A gate that never lapses (a condition, ``granted``) holds only its own step: the step
    after it in the same phase runs now instead of being missed with it; the held step still
    runs if the condition comes true in its phase, and the steps of a later phase keep order."""
    opened = {"window": 1}
    monkeypatch.setitem(gates.GATES, "cond", gates.Gate(
        "cond", lambda n, s: s.window >= opened["window"] and s.offset >= 2, gates.never))  # fmt: skip
    steps = (step("work", gates=("cond",)), step("report"), step("report", phase="merge"))
    neuron = make(tmp_path, list(range(0, 20)), plan(*steps))
    ran = []
    original = neuron.handle
    neuron.handle = lambda st: (
        ran.append((st.window, st.offset, st.plan is steps[1])) or original(st)
    )
    assert neuron.run() == 2
    # window 0: the condition never holds: work is missed, the upload-phase report runs at
    # offset 0 anyway; window 1: the report runs ahead at 0, work once the condition holds at 2
    assert ran == [(0, 0, True), (0, 6, False), (1, 0, True), (1, 2, False), (1, 6, False)]
    assert [c for c in neuron.calls if c[0] == "publish"] == [("publish", 1)]
    assert neuron.calls.count(("report", 0)) == 2 and neuron.calls.count(("report", 1)) == 2


def test_a_step_held_by_a_lapsing_gate_keeps_plan_order(tmp_path, monkeypatch):
    monkeypatch.setitem(gates.GATES, "slow", gates.Gate(
        "slow", lambda n, s: s.offset >= 2, None, "opens at offset 2"))  # fmt: skip
    steps = (step("work", gates=("slow",)), step("report"))
    neuron = make(tmp_path, list(range(0, 10)), plan(*steps))
    neuron.run()
    assert neuron.calls == [("sync", 0), ("publish", 0), ("report", 0)]


def test_version_out_lapses_after_a_quarter_of_the_upload_phase(tmp_path):
    class Behind:
        def latest_window(self):
            return -5  # the holder never published the previous merge

    lapse = gates.GATES["version_out"].lapse(WindowConfig(blocks=30, upload_deadline=18,
                                                          report_deadline=24))  # fmt: skip
    assert lapse == 4
    neuron = make(tmp_path, [])
    neuron.replica_of = lambda step: Behind()  # the model the step starts from
    from subnet.neuron.steps import Step

    assert not gates.version_out(neuron, Step(step(), 3, 0))


def not_ready_twice(neuron) -> list:
    """Make ``neuron.setup`` fail twice with NotReady, then pass; return the ticks it ran at."""
    tries: list = []

    def setup():
        tries.append(neuron.rt.clock.now())
        if len(tries) < 3:
            raise NotReady("dataset not published yet")

    neuron.setup = setup
    return tries


def test_setup_that_is_not_ready_is_retried_at_later_ticks(tmp_path, monkeypatch):
    monkeypatch.setattr("subnet.neuron.base.SETUP_RETRY_S", 0.0)
    neuron = make(tmp_path, list(range(0, 20)))
    tries = not_ready_twice(neuron)
    assert neuron.run() == 2
    assert tries[:3] == [0, 0, 1]  # once before the loop, then at each tick until ready
    # membership re-read after each miss (a new commitment may be what was missing), then per window
    assert neuron.rt.membership.refreshes == 2 + 2


def test_setup_is_retried_on_the_ticks_before_a_rooms_origin(tmp_path, monkeypatch):
    """A room run's ticks are negative until round 0: a member that was not ready at start
    retries then, so it is ready for window 0 (it used to wait for tick 0 to retry)."""
    monkeypatch.setattr("subnet.neuron.base.SETUP_RETRY_S", 0.0)
    neuron = make(tmp_path, list(range(-5, 20)))
    tries = not_ready_twice(neuron)
    assert neuron.run() == 2
    assert len(tries) == 3 and tries[-1] < 0, tries
    assert neuron.calls[:2] == [("sync", 0), ("publish", 0)]  # window 0 was not missed


def test_the_loop_stops_when_the_plans_stop_rule_is_met(tmp_path):
    rounds = plan(step())
    rounds = RunPlan(**{**rounds.__dict__, "stop": {"rule": "rounds", "rounds": 2}})
    neuron = make(tmp_path, list(range(0, 50)), rounds)
    assert neuron.run() == 2
    assert neuron.last_window == 1
