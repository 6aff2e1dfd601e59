"""Every refusal of the compiler: one PlanError with its reason code, before anything runs."""

from __future__ import annotations

import dataclasses

import pytest

from subnet.membership.roster import Member, Roster
from subnet.topology import PlanError, Template, compile_plan, load_spec
from subnet.topology.spec import parse_spec

SCORED = "@beam/scored-subnet@2.0.0"


def refused(reason, spec, template, roster, registries):
    with pytest.raises(PlanError) as error:
        compile_plan(spec, template, roster, registries)
    assert error.value.reason == reason, str(error.value)
    assert "\n" not in str(error.value)
    return str(error.value)


def members(*rows):
    return Roster(tuple(Member(h, frozenset(s), frozenset(p)) for h, s, p in rows))


MINER = ("m1", {"miner"}, {"runs.train"})
VALIDATOR = ("v1", {"validator"}, {"runs.observe", "runs.score"})
HOLDER = ("h1", {"holder"}, set())


def test_a_full_scored_roster_compiles(vocab):
    spec = load_spec(SCORED)
    plan = compile_plan(spec, Template(topology=SCORED), members(MINER, VALIDATOR, HOLDER), vocab)
    assert plan.ref == SCORED


def test_template_of_another_topology_or_version(vocab, fit):
    spec = load_spec(SCORED)
    roster = fit(spec)
    message = refused(
        "unknown_topology", spec, Template(topology="@beam/fedavg@1.0.0"), roster, vocab
    )
    assert "@beam/fedavg@1.0.0" in message
    refused("unknown_version", spec, Template(topology="@beam/scored-subnet@1.1.0"), roster, vocab)
    refused("bad_reference", spec, Template(topology="@beam/scored-subnet"), roster, vocab)


@pytest.mark.parametrize(
    "rows, slot",
    [
        ((VALIDATOR, HOLDER), "miner"),
        ((MINER, HOLDER), "validator"),
        ((MINER, VALIDATOR), "holder"),
    ],
)
def test_unfilled_role(rows, slot, vocab):
    message = refused(
        "role_unfilled", load_spec(SCORED), Template(topology=SCORED), members(*rows), vocab
    )
    assert f"slot {slot!r} needs at least 1" in message


def test_overfilled_role(vocab):
    roster = members(MINER, VALIDATOR, HOLDER, ("h2", {"holder"}, set()))
    message = refused(
        "role_overfilled", load_spec(SCORED), Template(topology=SCORED), roster, vocab
    )
    assert "'holder' takes at most 1" in message


def test_counts_follow_the_template(vocab, fit):
    spec = load_spec("@beam/fedavg-live@1.0.0")
    roster = fit(spec)  # the default cohort of 3
    assert compile_plan(spec, Template(topology=spec.ref), roster, vocab).slot("client").count == (
        3,
        3,
    )
    message = refused(
        "role_unfilled", spec, Template(topology=spec.ref, params={"cohort": 4}), roster, vocab
    )
    assert "'client' needs at least 4" in message
    refused(
        "role_overfilled", spec, Template(topology=spec.ref, params={"cohort": 2}), roster, vocab
    )


@pytest.mark.parametrize("drop", ["runs.observe", "runs.score"])
def test_member_without_a_required_permission(drop, vocab):
    validator = ("v1", {"validator"}, {"runs.observe", "runs.score"} - {drop})
    message = refused("missing_permission", load_spec(SCORED), Template(topology=SCORED),
                      members(MINER, validator, HOLDER), vocab)  # fmt: skip
    assert f"member v1 in slot 'validator' lacks permission {drop!r}" in message


def test_member_in_a_slot_the_spec_lacks(vocab):
    roster = members(MINER, VALIDATOR, HOLDER, ("w1", {"worker"}, {"runs.train"}))
    message = refused("unknown_slot", load_spec(SCORED), Template(topology=SCORED), roster, vocab)
    assert "w1" in message and "'worker'" in message


def test_lane_nobody_reads(raw, vocab, fit):
    data = raw("scored-subnet")
    data["lanes"]["scores"]["readers"] = []
    data["roles"]["holder"]["steps"][0]["reads"] = ["grads"]
    spec = parse_spec(data, "test")
    message = refused("lane_unread", spec, Template(topology=SCORED), fit(spec), vocab)
    assert "lane 'scores'" in message


def test_lane_whose_reader_slots_are_empty(raw, vocab):
    # the holder made optional: with none present, nobody reads the scores lane
    data = raw("scored-subnet")
    data["roles"]["holder"]["min"] = 0
    spec = parse_spec(data, "test")
    message = refused(
        "lane_unread", spec, Template(topology=SCORED), members(MINER, VALIDATOR), vocab
    )
    assert "lane 'scores'" in message and "no member fills a reader slot (holder)" in message


def test_lane_whose_writer_slots_are_empty(raw, vocab):
    # validators made optional: with none present, nobody writes the scores lane
    data = raw("scored-subnet")
    data["roles"]["validator"]["min"] = 0
    spec = parse_spec(data, "test")
    message = refused(
        "lane_unwritten", spec, Template(topology=SCORED), members(MINER, HOLDER), vocab
    )
    assert "lane 'scores'" in message and "no member fills a writer slot (validator)" in message


def test_a_commit_reveal_lane_needs_a_reveal_step_in_every_writer_slot(raw, vocab, fit):
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"] = data["roles"]["miner"]["steps"][:1]  # train, no reveal
    spec = parse_spec(data, "test")
    message = refused("bad_spec", spec, Template(topology=SCORED), fit(spec), vocab)
    assert "lane 'grads' is commit_reveal but slot 'miner' has no step in phase 'reveal'" in message


def test_a_commit_reveal_lane_is_read_before_the_merge_only_after_the_reveals(raw, vocab, fit):
    data = raw("scored-subnet")
    data["roles"]["validator"]["steps"][0]["gates"] = []
    spec = parse_spec(data, "test")
    message = refused("bad_spec", spec, Template(topology=SCORED), fit(spec), vocab)
    assert "slot 'validator' reads it in phase 'score' without the gate 'revealed'" in message


def test_commit_reveal_is_for_upload_lanes(raw, vocab, fit):
    data = raw("scored-subnet")
    data["lanes"]["scores"]["commit_reveal"] = True
    spec = parse_spec(data, "test")
    message = refused("bad_spec", spec, Template(topology=SCORED), fit(spec), vocab)
    assert "commit_reveal is for gradient lanes, not 'scores'" in message


def test_lane_with_no_writer(raw, vocab, fit):
    data = raw("scored-subnet")
    data["lanes"]["audit"] = {
        "kind": "scores",
        "writers": [],
        "readers": ["holder"],
        "mode": "directed",
    }
    spec = parse_spec(data, "test")
    assert "lane 'audit'" in refused(
        "lane_unwritten", spec, Template(topology=SCORED), fit(spec), vocab
    )
    data["lanes"]["audit"]["writers"] = ["validator"]  # listed, but no validator step writes it
    spec = parse_spec(data, "test")
    assert "no step" in refused("lane_unwritten", spec, Template(topology=SCORED), fit(spec), vocab)


def test_action_missing_from_its_role_class_registry(vocab, fit):
    spec = load_spec(SCORED)
    registries = dataclasses.replace(vocab, actions={**vocab.actions, "validator": frozenset()})
    message = refused("unknown_action", spec, Template(topology=SCORED), fit(spec), registries)
    assert "'score'" in message and "'validator'" in message
    # an action registered for another role class does not count
    registries = dataclasses.replace(
        vocab, actions={**vocab.actions, "miner": frozenset({"score"})}
    )
    refused("unknown_action", spec, Template(topology=SCORED), fit(spec), registries)


def test_gate_missing_from_the_registry(vocab, fit):
    spec = load_spec(SCORED)
    registries = dataclasses.replace(vocab, gates=vocab.gates - {"version_out"})
    assert "'version_out'" in refused(
        "unknown_gate", spec, Template(topology=SCORED), fit(spec), registries
    )


@pytest.mark.parametrize(
    "field, name, ref",
    [
        ("merge_weights", "median_score", SCORED),
        ("data_rules", "assigned", SCORED),
        ("data_rules", "assigned", "@beam/two-models@1.0.0"),  # a step's own data rule
        ("stop_rules", "loss_below", "@beam/fedavg@1.0.0"),
        ("aggregation_rules", "mean", "@beam/diloco@1.0.0"),
        ("outer_rules", "nesterov", "@beam/diloco@1.0.0"),
        ("lane_kinds", "data-grant", "@beam/elastic-diloco@1.0.0"),
    ],
)
def test_rule_missing_from_the_registry(field, name, ref, vocab, fit):
    spec = load_spec(ref)
    if field == "data_rules" and ref != SCORED:
        registries = dataclasses.replace(vocab, data_rules=frozenset({"granted"}))
    else:
        registries = dataclasses.replace(vocab, **{field: getattr(vocab, field) - {name}})
    message = refused("unknown_rule", spec, Template(topology=ref), fit(spec), registries)
    assert repr(name) in message


def test_optional_registries_are_unchecked_when_absent(vocab, fit):
    spec = load_spec("@beam/fedavg@1.0.0")
    registries = dataclasses.replace(vocab, stop_rules=None, lane_kinds=None, outer_rules=None,
                                     aggregation_rules=None)  # fmt: skip
    assert (
        compile_plan(spec, Template(topology=spec.ref), fit(spec), registries).stop["rule"]
        == "loss_below"
    )


@pytest.mark.parametrize(
    "params, words",
    [
        ({"round": 3}, "unknown parameter 'round'"),
        ({"rounds": "3"}, "'rounds' must be int"),
        ({"rounds": 3.0}, "'rounds' must be int"),
        ({"rounds": True}, "'rounds' must be int"),
        ({"rounds": 0}, "'rounds' must be >= 1"),
        ({"outer_momentum": 1.5}, "'outer_momentum' must be <= 0.99"),
        ({"outer_lr": "fast"}, "'outer_lr' must be float"),
    ],
)
def test_bad_parameter(params, words, vocab, fit):
    spec = load_spec("@beam/diloco@1.0.0")
    message = refused(
        "bad_parameter", spec, Template(topology=spec.ref, params=params), fit(spec), vocab
    )
    assert words in message


def test_list_and_choice_parameters(vocab, fit):
    spec = load_spec("@beam/sweep@1.0.0")
    ok = Template(topology=spec.ref, params={"points": [1, 0.5], "sweep_key": "inner.weight_decay"})
    plan = compile_plan(spec, ok, fit(spec), vocab)
    assert plan.params["points"] == (1.0, 0.5)
    assert plan.slot("worker").steps[0].params["points"] == (1.0, 0.5)
    for params in (
        {"points": [0.1, "x"]},
        {"points": 0.1},
        {"points": [-1.0]},
        {"sweep_key": "seed"},
    ):
        refused("bad_parameter", spec, Template(topology=spec.ref, params=params), fit(spec), vocab)


def test_int_parameter_accepted_where_a_float_is_declared(vocab, fit):
    spec = load_spec("@beam/diloco@1.0.0")
    plan = compile_plan(spec, Template(topology=spec.ref, params={"outer_lr": 1}), fit(spec), vocab)
    assert plan.outer == {"name": "nesterov", "lr": 1.0, "momentum": 0.9}
    assert isinstance(plan.outer["lr"], float)


def test_parameters_that_make_a_count_impossible(raw, vocab, fit):
    data = raw("diloco")
    data["roles"]["worker"]["max"] = 4
    spec = parse_spec(data, "test")
    message = refused("bad_parameter", spec, Template(topology=spec.ref, params={"workers": 5}),
                      fit(spec), vocab)  # fmt: skip
    assert "slot 'worker': min 5 > max 4" in message


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_parameter(value, vocab, fit):
    spec = load_spec("@beam/diloco@1.0.0")
    template = Template(topology=spec.ref, params={"outer_lr": value})
    assert "finite" in refused("bad_parameter", spec, template, fit(spec), vocab)


def test_registries_may_be_dicts_of_code(vocab, fit):
    spec = load_spec(SCORED)
    code = {"train": print, "score": print, "merge": print}
    registries = dataclasses.replace(
        vocab,
        actions={
            "miner": {"train": print, "reveal": print},
            "validator": {"score": print},
            "holder": code,
        },
        gates={"version_out": print, "revealed": print},
        merge_weights={"median_score": print},
        data_rules={"assigned": print},
    )
    assert compile_plan(spec, Template(topology=SCORED), fit(spec), registries).ref == SCORED


def test_registry_gaps_lists_every_missing_name(vocab, specs):
    # registries that know only subnet mode: what fedavg still needs
    from subnet.topology import registry_gaps, spec_vocabulary

    scored = spec_vocabulary([specs["@beam/scored-subnet"]])
    gaps = registry_gaps(specs["@beam/fedavg"], scored)
    assert [(g.reason, g.message.split(": ")[-1]) for g in gaps] == [
        ("unknown_action", "action 'reduce' is not registered for role class 'miner'"),
        ("unknown_gate", "gate 'children_in' of 'reduce' is not registered"),
        ("unknown_gate", "gate 'children_in' of 'merge' is not registered"),
        ("unknown_rule", "merge-weights rule 'units' is not registered"),
        ("unknown_rule", "stop rule 'loss_below' is not registered"),
        ("unknown_rule", "aggregation rule 'mean' is not registered"),
        ("unknown_rule", "outer rule 'fedavg' is not registered"),
    ]
    assert registry_gaps(specs["@beam/fedavg"], vocab) == []
