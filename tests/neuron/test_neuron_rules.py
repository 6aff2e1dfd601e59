"""The rule registries: known answers for merge weights, builders for aggregation and outer
steps from a plan's tables, and stop rules the loop honours."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from subnet.config import ProtocolConfig
from subnet.neuron.rules import (
    AGGREGATION_RULES,
    DATA_RULES,
    MERGE_WEIGHTS,
    OUTER_RULES,
    STOP_RULES,
)

UNITS = {"a": 30, "b": 10}
REPORTS = {"v1": {"a": 0.1, "b": 0.3}, "v2": {"a": 0.2, "b": 0.5}, "v3": {"a": 9.0, "b": 0.4}}


def test_merge_weights_known_answers():
    assert MERGE_WEIGHTS["units"](REPORTS, {"v1"}, UNITS) == {"a": 0.75, "b": 0.25}
    assert MERGE_WEIGHTS["equal"](REPORTS, {"v1"}, UNITS) == {"a": 0.5, "b": 0.5}
    # median over trusted v1..v3: a 0.2, b 0.4 -> 1/3, 2/3 (v3's outlier moves nothing)
    got = MERGE_WEIGHTS["median_score"](REPORTS, {"v1", "v2", "v3"}, UNITS)
    assert got == pytest.approx({"a": 1 / 3, "b": 2 / 3})
    assert MERGE_WEIGHTS["median_score"]({}, set(), UNITS) == {"a": 0.75, "b": 0.25}


def test_aggregation_and_outer_come_from_the_plan_table_or_the_protocol():
    protocol = ProtocolConfig()
    assert AGGREGATION_RULES["protocol"](protocol, {"rule": "protocol"}) == protocol.aggregation
    mean = AGGREGATION_RULES["mean"](protocol, {"rule": "mean", "clip_to_median_norm": False,
                                                "tree_fanout": 2})  # fmt: skip
    assert (mean.rule, mean.clip_to_median_norm) == ("mean", False)
    assert OUTER_RULES["protocol"](protocol, {"name": "protocol"}) == protocol.outer
    nesterov = OUTER_RULES["nesterov"](protocol, {"name": "nesterov", "lr": 0.5, "momentum": 0.8})
    assert (nesterov.name, nesterov.lr, nesterov.momentum) == ("nesterov", 0.5, 0.8)
    assert OUTER_RULES["fedavg"](protocol, {"name": "fedavg"}).name == "fedavg"


def test_stop_rules():
    neuron = SimpleNamespace(last_window=3)
    assert not STOP_RULES["never"](neuron, {"rule": "never"})
    assert STOP_RULES["rounds"](neuron, {"rule": "rounds", "rounds": 4})
    assert not STOP_RULES["rounds"](neuron, {"rule": "rounds", "rounds": 5})


def test_the_assigned_data_rule_is_a_pure_function_of_seed_window_and_hotkey():
    rt = SimpleNamespace(cfg=SimpleNamespace(protocol=ProtocolConfig()),
                         plan=SimpleNamespace(slots={}))  # fmt: skip
    data = SimpleNamespace(split_samples=lambda split: 1000)
    first = DATA_RULES["assigned"](rt, data, 5)
    assert first("alice") == DATA_RULES["assigned"](rt, data, 5)("alice")
    assert first("alice") != first("bob") and first("alice") != DATA_RULES["assigned"](rt, data, 6)(
        "alice"
    )
    assert len(first("alice")) == 30 * 8  # inner steps x micro-batch x accumulation


def test_the_plans_inner_steps_set_the_sample_count():
    """H comes from the plan's train step, so the trainer and every receipt check agree."""
    train = SimpleNamespace(action="train", params={"inner_steps": 3})
    plan = SimpleNamespace(slots={"worker": SimpleNamespace(steps=(train,))})
    rt = SimpleNamespace(cfg=SimpleNamespace(protocol=ProtocolConfig()), plan=plan)
    data = SimpleNamespace(split_samples=lambda split: 1000)
    assert len(DATA_RULES["assigned"](rt, data, 5)("alice")) == 3 * 8
