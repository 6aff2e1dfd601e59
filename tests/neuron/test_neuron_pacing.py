"""Pacing: the deadline in seconds, fitting steps to it, and stopping a slow window in time."""

from __future__ import annotations

import math

import pytest
import torch

from subnet.neuron.pacing import BlockTimer, Pace, explain, margin_s, train_paced
from subnet.training.config import InnerConfig
from subnet.training.inner import InnerResult


def test_block_time_is_measured_from_observations():
    timer = BlockTimer(nominal_s=12.0)
    assert timer.seconds_per_block() == 12.0  # nothing seen yet: the chain's nominal figure
    timer.observe(100, 50.0)
    timer.observe(100, 50.4)  # the same block seen again changes nothing
    assert timer.seconds_per_block() == 12.0
    timer.observe(104, 52.0)
    assert timer.seconds_per_block() == pytest.approx(0.5)
    # deadline block 110 at 0.5 s/block, last seen 104 at t=52, now 52.5: 6 blocks - 0.5 s
    assert timer.seconds_until(110, now=52.5) == pytest.approx(2.5)
    assert timer.seconds_until(103, now=52.5) < 0  # already past
    assert BlockTimer().seconds_until(5, now=0.0) == math.inf


def test_margin_grows_with_block_time_and_time_left():
    assert margin_s(10.0, 0.5) == pytest.approx(1.5)
    assert margin_s(-3.0, 12.0) == pytest.approx(12.0)


def test_explain_gives_the_numbers():
    text = explain(4.04, Pace(step_s=0.25, tail_s=0.5), 0.9)
    assert text == (
        "4.0 s left before the upload deadline, 0.25 s per step, 0.5 s to compress and upload, "
        "0.9 s margin"
    )
    assert "step time unknown" in explain(1.0, Pace(), 0.5)


class FakeTraining:
    """``train_inner`` on a fake clock: every step costs ``step_s`` seconds."""

    def __init__(self, step_s: float, clock: list[float]) -> None:
        self.step_s, self.clock, self.chunks = step_s, clock, []

    def __call__(self, model, stream, cfg, optimizer) -> InnerResult:
        taken = 0
        for _ in range(cfg.steps):
            if next(stream, None) is None:
                break
            taken += 1
        self.clock[0] += taken * self.step_s
        self.chunks.append(taken)
        return InnerResult(
            tokens=taken * 64, steps=taken, mean_loss=2.0, seconds=taken * self.step_s
        )


def paced(step_s: float, budget: float, steps: int = 20, least: int = 5, pace: Pace | None = None,
          batches: int = 100):  # fmt: skip
    clock = [0.0]
    fake = FakeTraining(step_s, clock)
    cfg = InnerConfig(steps=steps, min_steps=least)
    out = train_paced(torch.nn.Linear(1, 1), iter(range(batches)), cfg, None, steps=steps,
                      seconds_left=lambda: budget - clock[0], pace=pace or Pace(), train=fake)  # fmt: skip
    return out, fake, clock[0]


def test_train_paced_runs_every_step_when_time_allows():
    out, fake, spent = paced(step_s=0.1, budget=10.0)
    assert out.result.steps == 20 and out.stopped == "" and spent <= 10.0
    assert out.result.tokens == 20 * 64 and out.result.mean_loss == pytest.approx(2.0)
    assert len(fake.chunks) < 20  # plenty of time: large chunks, few clock checks


def test_train_paced_stops_before_the_deadline_on_a_first_window():
    """No step time known yet and steps slower than expected: stop in time, keep a prefix."""
    out, _, spent = paced(step_s=0.5, budget=6.0)
    assert out.stopped == "deadline" and 5 <= out.result.steps < 20
    assert spent <= 6.0


def test_train_paced_abandons_when_the_minimum_cannot_be_reached():
    out, _, spent = paced(step_s=1.0, budget=3.5)
    assert out.stopped == "abandoned" and out.result.steps < 5 and spent <= 3.5


def test_a_stale_slow_estimate_is_probed_not_believed():
    """Remembered 1 s/step from a busier hour; now a step takes 0.1 s: train, do not skip."""
    pace = Pace(step_s=1.0)
    out, fake, _ = paced(step_s=0.1, budget=1.5, pace=pace)
    assert fake.chunks[0] == 1  # the probe
    assert out.stopped == "deadline" and 10 <= out.result.steps < 20
    assert pace.step_s == pytest.approx(0.1)


def test_a_stale_fast_estimate_still_stops_in_time():
    pace = Pace(step_s=0.01)
    out, _, spent = paced(step_s=0.4, budget=6.0, pace=pace)
    assert out.stopped == "deadline" and spent <= 6.0 and out.result.steps >= 5


def test_no_deadline_trains_everything_in_one_call():
    out, fake, _ = paced(step_s=0.1, budget=math.inf)
    assert out.result.steps == 20 and out.stopped == "" and fake.chunks == [20]


def test_a_manual_clock_has_no_deadline_in_seconds():
    from types import SimpleNamespace

    from subnet.clock import ManualClock, WindowClock
    from subnet.config import ProtocolConfig
    from subnet.neuron.pacer import Pacer

    protocol = ProtocolConfig()
    cfg, clock = SimpleNamespace(protocol=protocol), ManualClock(start=5)
    windows = WindowClock(protocol.window)
    rt = SimpleNamespace(
        cfg=cfg, metrics=Recorder(), clock=clock, windows=windows, tick_seconds=None
    )
    pacer = Pacer(rt)
    assert not pacer.active and pacer.seconds_to_deadline(0) == math.inf
    pacer.uploaded(0)
    assert rt.metrics.records == []


def test_train_paced_stops_when_the_data_runs_out():
    out, _, _ = paced(step_s=0.01, budget=100.0, batches=7)
    assert out.stopped == "data" and out.result.steps == 7


def test_pace_follows_a_slowdown():
    pace = Pace(alpha=0.5)
    pace.observe_steps(10, 1.0)
    pace.observe_steps(10, 3.0)
    assert pace.step_s == pytest.approx(0.2)
    pace.observe_tail(1.0)
    assert pace.tail_s == 1.0


class Recorder:
    def __init__(self):
        self.records = []

    def log(self, event, **fields):
        self.records.append((event, fields))


def bare_pacer(head: int, step_s: float | None):
    """A Pacer on a chain that reports ``head``, blocks of 1 s, a known pace."""
    from types import SimpleNamespace

    from subnet.clock import WindowClock
    from subnet.config import ProtocolConfig
    from subnet.neuron.pacer import Pacer

    protocol = ProtocolConfig(window={"blocks": 20, "upload_deadline": 10, "report_deadline": 14},
                              inner={"steps": 20, "min_steps": 10})  # fmt: skip
    rt = SimpleNamespace(cfg=SimpleNamespace(protocol=protocol), metrics=Recorder(),
                         clock=SimpleNamespace(now=lambda: head), tick_seconds=1.0,
                         windows=WindowClock(protocol.window))  # fmt: skip
    pacer = Pacer(rt)
    pacer.pace = Pace(step_s=step_s, tail_s=0.5)
    return pacer


def test_miner_skips_a_window_it_cannot_finish_and_says_why():
    from types import SimpleNamespace

    from subnet.neuron.pacer import WindowSkipped

    pacer = bare_pacer(head=109, step_s=1.0)  # uploads for window 5 are due at block 110: ~1 s
    pacer.blocks.observe(108, __import__("time").monotonic() - 1.0)
    replica = SimpleNamespace(model=torch.nn.Linear(1, 1), reset=lambda: None)
    with pytest.raises(WindowSkipped, match="even 10 steps"):
        pacer.train(5, replica, iter([]), None)
    event, fields = pacer.rt.metrics.records[-1]
    assert event == "window_skipped" and fields["reason"] == "too_slow"
    assert fields["step_seconds"] == 1.0 and fields["seconds_left"] <= 1.1
    assert "s left before the upload deadline" in fields["detail"]


def test_miner_records_a_late_upload_with_the_numbers():
    pacer = bare_pacer(head=112, step_s=0.1)  # the head is already past block 110
    pacer.blocks.observe(111, 0.0)
    pacer.uploaded(5)
    event, fields = pacer.rt.metrics.records[-1]
    assert event == "upload" and fields["late"] is True
    assert fields["deadline_block"] == 110 and fields["block"] == 112
    assert fields["seconds_to_deadline"] < 0
    on_time = bare_pacer(head=104, step_s=0.1)
    on_time.uploaded(5)
    assert on_time.rt.metrics.records[-1][1]["late"] is False


def test_a_slowdown_mid_window_still_stops_in_time():
    """Steps double in cost after the probe: short chunks notice and stop before the budget."""
    clock = [0.0]

    class Slowing(FakeTraining):
        def __call__(self, model, stream, cfg, optimizer):
            self.step_s = 0.1 if not self.chunks else 0.2
            return super().__call__(model, stream, cfg, optimizer)

    fake = Slowing(0.1, clock)
    cfg = InnerConfig(steps=40, min_steps=5)
    out = train_paced(torch.nn.Linear(1, 1), iter(range(100)), cfg, None, steps=40,
                      seconds_left=lambda: 4.0 - clock[0], pace=Pace(), train=fake)  # fmt: skip
    assert out.stopped == "deadline" and clock[0] <= 4.0
    assert max(fake.chunks) <= 10  # no chunk longer than about a second at the estimate
