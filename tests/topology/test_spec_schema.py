"""A spec that contradicts itself is refused when it is parsed, with one line naming the field."""

from __future__ import annotations

import pytest

from subnet.topology import PlanError
from subnet.topology.spec import parse_spec


def bad_spec(data):
    with pytest.raises(PlanError) as error:
        parse_spec(data, "my.toml")
    assert error.value.reason == "bad_spec"
    assert "\n" not in str(error.value) and "my.toml" in str(error.value)
    return str(error.value)


def test_the_worked_example_parses(raw):
    assert parse_spec(raw("scored-subnet"), "x").ref == "@beam/scored-subnet@2.0.0"


def test_unknown_key_is_refused(raw):
    data = raw("scored-subnet")
    data["lanes"]["model"]["merge_weights"] = "units"  # a TOML key placed under the wrong table
    assert "lanes.model.merge_weights" in bad_spec(data)


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0-rc1", "01.0.0"])
def test_version_must_be_semver(raw, version):
    data = raw("scored-subnet")
    data["version"] = version
    assert "semantic version" in bad_spec(data)


def test_name_must_be_scoped(raw):
    data = raw("scored-subnet")
    data["name"] = "scored-subnet"
    assert "topology name" in bad_spec(data)


@pytest.mark.parametrize("tags", [["scored"], ["static", "elastic"]])
def test_exactly_one_of_static_and_elastic(raw, tags):
    data = raw("scored-subnet")
    data["tags"] = tags
    assert "exactly one of 'static' and 'elastic'" in bad_spec(data)


def test_undeclared_parameter_reference(raw):
    data = raw("diloco")
    data["outer"]["lr"] = "$outer_rate"
    assert "'$outer_rate' names no declared parameter" in bad_spec(data)


def test_count_must_reference_an_int_parameter(raw):
    data = raw("diloco")
    data["roles"]["worker"]["min"] = "$outer_lr"
    assert "int parameter" in bad_spec(data)
    data["roles"]["worker"]["min"] = 3
    data["roles"]["worker"]["max"] = 2
    assert "min 3 > max 2" in bad_spec(data)


def test_parameter_default_of_the_wrong_type(raw):
    data = raw("diloco")
    data["params"]["rounds"]["default"] = "ten"
    assert "'default' must be int" in bad_spec(data)


def test_unknown_permission_and_holding(raw):
    data = raw("scored-subnet")
    data["roles"]["miner"]["permissions"] = ["runs.mine"]
    assert "unknown permission 'runs.mine'" in bad_spec(data)
    data = raw("scored-subnet")
    data["roles"]["holder"]["holds"] = ["keys"]
    assert "unknown holding 'keys'" in bad_spec(data)


def test_unknown_role_class_and_phase(raw):
    data = raw("scored-subnet")
    data["roles"]["miner"]["class"] = "trainer"
    bad_spec(data)
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"][0]["phase"] = "later"
    bad_spec(data)


def test_steps_in_phase_order(raw):
    data = raw("fedavg")
    steps = data["roles"]["worker"]["steps"]
    steps.reverse()
    assert "phase order" in bad_spec(data)


def test_step_writes_a_lane_its_slot_does_not_write(raw):
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"][0]["lane"] = "scores"
    assert "miner.train writes lane 'scores'" in bad_spec(data)
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"][0]["lane"] = "nowhere"
    assert "'nowhere'" in bad_spec(data)


def test_step_reads_a_lane_its_slot_does_not_read(raw):
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"][0]["reads"] = ["scores"]
    assert "miner.train reads lane 'scores'" in bad_spec(data)


def test_lane_names_an_unknown_slot(raw):
    data = raw("scored-subnet")
    data["lanes"]["grads"]["readers"] = ["validator", "auditor"]
    assert "slot 'auditor'" in bad_spec(data)


def test_rules_must_be_named(raw):
    for table, key in (("stop", "rule"), ("outer", "name"), ("aggregation", "rule")):
        data = raw("scored-subnet")
        del data[table][key]
        assert repr(key) in bad_spec(data)
    data = raw("diloco")
    data["stop"]["by"] = "nobody"
    assert "stop.by" in bad_spec(data)


def test_a_slot_needs_a_step(raw):
    data = raw("scored-subnet")
    data["roles"]["validator"]["steps"] = []
    bad_spec(data)


def test_non_finite_values_are_refused(raw):
    data = raw("diloco")
    data["outer"]["lr"] = float("nan")
    assert "finite" in bad_spec(data)
    data = raw("diloco")
    data["params"]["outer_lr"]["default"] = float("inf")
    assert "finite" in bad_spec(data)
