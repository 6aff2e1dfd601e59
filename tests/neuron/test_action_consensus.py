"""Consensus: the median of the validators' scores becomes the holder's merge weights."""

from __future__ import annotations

import pytest
from neuron_ticks import records, run_at

from subnet.neuron.actions.consensus import median_weights
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.validator import ScoreReport, Validator
from subnet.topology import Template

REPORTS = {"v1": {"a": 0.3, "b": 0.1}, "v2": {"a": 0.5, "b": 0.1}, "v3": {"a": 0.0, "b": 0.9}}


def test_median_weights_known_answer():
    got = median_weights(REPORTS, {"v1", "v2", "v3"})
    assert got == pytest.approx({"a": 0.75, "b": 0.25})  # medians 0.3 and 0.1
    # an untrusted reporter moves nothing; one dishonest trusted one cannot move a median of 3
    assert median_weights({**REPORTS, "x": {"b": 100.0}}, {"v1", "v2", "v3"}) == got
    assert median_weights({}, set()) == {}


def test_the_holder_merges_by_the_consensus_weights(world_with):
    template = Template(topology="@beam/subnet@1.0.0")
    names = {"holder": "holder", "c": "consensus", "v1": "validator", "v2": "validator",
             "v3": "validator", "m1": "miner", "m2": "miner"}  # fmt: skip
    world = world_with(names, template)
    holder, cons = ModelHolder(world.runtimes["holder"]), ModelHolder(world.runtimes["c"])
    assert holder.try_setup() and cons.try_setup()
    assert cons.version is None  # the consensus slot holds no model and publishes none
    for name in ("m1", "m2"):
        assert run_at(Miner(world.runtimes[name]), 0) == 1
    m1, m2 = world.hotkey("m1"), world.hotkey("m2")
    for name, report in REPORTS.items():  # signed score reports, as the score step sends them
        validator = Validator(world.runtimes[name])
        assert validator.try_setup()
        scores = {m1: report["a"], m2: report["b"]}
        validator.publish(0, ScoreReport(0, validator.replica.version, scores))
    assert run_at(cons, 6) == 1
    assert records(cons.rt, "consensus")[-1]["weights"] == pytest.approx({m1: 0.75, m2: 0.25})
    assert run_at(holder, 6) == 1  # weights_out passes: the weights are out
    version = records(holder.rt, "version")[-1]
    assert version["version"] == 1 and version["contributors"] == pytest.approx(
        {m1: 0.75, m2: 0.25}
    )
    assert version["reports"] == 1  # the one trusted report: the consensus weights
