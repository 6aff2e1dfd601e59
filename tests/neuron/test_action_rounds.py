"""Round gates and the loss_below stop rule's signed final marker."""

from __future__ import annotations

from types import SimpleNamespace

from subnet.neuron.actions.rounds import FINAL_LANE, final_round, first_round
from subnet.neuron.actions.signed import get_message, put_message
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.storage.keys import ObjectKind
from subnet.topology import Template
from subnet.wire import FinalMark, FinalMeta


def _step(window: int):
    return SimpleNamespace(window=window)


def test_first_and_final_round(world_with):
    template = Template(topology="@beam/sweep@1.0.0", params={"rounds": 3, "min_workers": 1})
    world = world_with({"holder": "lead", "m1": "worker"}, template)
    neuron = SimpleNamespace(rt=world.runtimes["holder"])
    assert [first_round(neuron, _step(w)) for w in range(3)] == [True, False, False]
    assert [final_round(neuron, _step(w)) for w in range(3)] == [False, False, True]


def test_loss_below_publishes_a_final_marker_every_member_obeys(world_with):
    template = Template(topology="@beam/fedavg@1.0.0",
                        params={"workers": 2, "target_loss": 100.0, "max_rounds": 9})  # fmt: skip
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, template)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    worker = Miner(world.runtimes["m1"])
    lead.last_window = worker.last_window = 0
    assert not worker.finished()  # no marker yet
    # a marker from a member that does not decide is never read
    mark = FinalMeta(final=FinalMark(window=0, loss=0.0))
    put_message(world.runtimes["m2"], ObjectKind.RUN_FINAL, 0, FINAL_LANE, mark)
    assert not worker.finished()
    assert lead.finished()  # held-out loss < 100: the lead stops and signs the marker
    marker = get_message(worker.rt, lead.rt.hotkey, ObjectKind.RUN_FINAL, 0, FINAL_LANE, FinalMeta)
    assert marker.final.window == 0 and marker.final.loss < 100.0
    assert worker.finished()
    worker.last_window = 1  # the marker of the window before ours still stops us
    assert worker.finished()


def test_loss_below_waits_above_the_threshold_and_stops_at_max_rounds(world_with):
    template = Template(topology="@beam/fedavg@1.0.0",
                        params={"workers": 1, "target_loss": 0.0, "max_rounds": 3})  # fmt: skip
    world = world_with({"holder": "lead", "m1": "worker"}, template)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    lead.last_window = 1
    assert not lead.finished()
    lead.last_window = 2
    assert lead.finished()
