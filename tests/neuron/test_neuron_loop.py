"""The one loop: each window handled once at the role's phase, failures contained, resume exact."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from subnet.clock import WindowClock
from subnet.compression import state_digest
from subnet.config import WindowConfig
from subnet.monitor import MetricsSink
from subnet.neuron.base import BaseNeuron
from subnet.storage.base import StorageError


@dataclass
class FakeChain:
    """Blocks for the loop to follow (a test double for the chain's subscription)."""

    blocks: list[int]
    head: int = 0

    def follow_blocks(self, latest_only: bool = False):
        for b in self.blocks:
            self.head = b
            yield b

    def block(self) -> int:
        return self.head


@dataclass
class FakeRuntime:
    chain: FakeChain
    state_dir: object
    clock: WindowClock = field(
        default_factory=lambda: WindowClock(
            WindowConfig(blocks=10, upload_deadline=4, report_deadline=6)
        )
    )
    metrics: MetricsSink = None


class Recorder(BaseNeuron):
    role = "recorder"

    def __init__(self, rt, fail_on: set[int] = frozenset()) -> None:
        super().__init__(rt)
        self.calls: list[tuple[str, int]] = []
        self.fail_on = fail_on
        self.weights = torch.zeros(4)

    def phase(self):
        return 2, 5

    def sync(self, window):
        self.calls.append(("sync", window))

    def step(self, window):
        if window in self.fail_on:
            raise StorageError("unavailable", endpoint="http://s3", bucket="b", detail="down")
        self.weights += window
        return window

    def publish(self, window, result):
        self.calls.append(("publish", result))

    def state(self):
        return {"note": "x"}, {"w": self.weights}

    def restore(self, meta, tensors):
        self.weights = tensors["w"].clone()


def make(tmp_path, blocks, **kw) -> Recorder:
    rt = FakeRuntime(FakeChain(blocks), tmp_path / "state")
    rt.metrics = MetricsSink(tmp_path / "metrics.jsonl")
    return Recorder(rt, **kw)


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


def test_stop_during_a_window_lets_it_finish_and_save(tmp_path):
    neuron = make(tmp_path, list(range(0, 30)))
    original = neuron.step

    def step_then_stop(window):
        if window == 1:
            neuron.stop()  # busy: must not raise
        return original(window)

    neuron.step = step_then_stop
    assert neuron.run() == 1 + 1  # windows 0 and 1; the loop ends at the next block
    assert neuron.state_file.load()[0]["last_window"] == 1
