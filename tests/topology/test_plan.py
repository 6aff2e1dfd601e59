"""The plan: immutable, its digest stable across processes and orderings and blind to the roster."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from subnet.membership.roster import Member, Roster
from subnet.topology import Template, compile_plan, load_spec
from subnet.topology.spec import parse_spec

REF = "@beam/diloco@1.0.0"
ROOT = Path(__file__).resolve().parents[2]


def plan_of(vocab, fit, params=None, spec=None, roster=None):
    spec = spec or load_spec(REF)
    template = Template(topology=spec.ref, params=params or {})
    return compile_plan(spec, template, roster or fit(spec, params), vocab)


def test_digest_changes_with_each_parameter(vocab, fit):
    base = plan_of(vocab, fit).digest
    changed = {plan_of(vocab, fit, {name: value}).digest
               for name, value in {"rounds": 11, "outer_lr": 0.5, "inner_steps": 31,
                                   "outer_momentum": 0.8}.items()}  # fmt: skip
    assert base not in changed and len(changed) == 4


def test_digest_counts_defaults_as_given(vocab, fit):
    # a template that spells out a default binds the same run as one that leaves it out
    assert plan_of(vocab, fit, {"rounds": 10, "outer_lr": 0.7}).digest == plan_of(vocab, fit).digest


def test_digest_ignores_template_parameter_order(vocab, fit):
    one = plan_of(vocab, fit, {"rounds": 3, "outer_lr": 0.5})
    two = plan_of(vocab, fit, {"outer_lr": 0.5, "rounds": 3})
    assert one.digest == two.digest


def test_digest_ignores_the_roster(vocab, fit):
    spec = load_spec("@beam/scored-subnet@2.0.0")
    small = fit(spec)
    big = Roster(
        small.members + (Member("m9", frozenset({"miner"}), frozenset({"runs.train"}), uid=9),)
    )
    assert (
        plan_of(vocab, fit, spec=spec, roster=small).digest
        == plan_of(vocab, fit, spec=spec, roster=big).digest
    )


def test_digest_ignores_file_layout_and_set_order(raw, vocab, fit):
    data = raw("scored-subnet")
    reordered = dict(reversed(list(data.items())))  # tables and keys in another order
    reordered["roles"] = dict(reversed(list(data["roles"].items())))
    reordered["lanes"]["grads"]["readers"] = ["holder", "validator"]  # was validator, holder
    reordered["roles"]["validator"]["permissions"] = ["runs.score", "runs.observe"]
    a = parse_spec(data, "a")
    b = parse_spec(reordered, "b")
    assert plan_of(vocab, fit, spec=a).digest == plan_of(vocab, fit, spec=b).digest


def test_digest_changes_with_spec_content_and_version(raw, vocab, fit):
    base = plan_of(vocab, fit, spec=parse_spec(raw("scored-subnet"), "x")).digest
    data = raw("scored-subnet")
    data["version"] = "1.0.1"
    spec = parse_spec(data, "x")
    bumped = compile_plan(spec, Template(topology=spec.ref), fit(spec), vocab).digest
    data = raw("scored-subnet")
    data["roles"]["miner"]["steps"][0]["gates"] = []
    edited = plan_of(vocab, fit, spec=parse_spec(data, "x")).digest
    assert len({base, bumped, edited}) == 3


_SNIPPET = """
import sys
sys.path.insert(0, "tests/topology")
from conftest import fitting_roster
from subnet.topology import Template, builtin_specs, compile_plan, spec_vocabulary
specs = builtin_specs()
vocab = spec_vocabulary(specs)
for spec in specs:
    plan = compile_plan(spec, Template(topology=spec.ref), fitting_roster(spec), vocab)
    print(spec.ref, plan.digest)
"""


def test_digest_is_stable_across_processes(specs, vocab, fit):
    # str hashes (and so set order) differ per process; the digest must not
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        run = subprocess.run([sys.executable, "-c", _SNIPPET], env=env, capture_output=True,
                             text=True, timeout=120, check=True, cwd=ROOT)  # fmt: skip
        outputs.append(dict(line.split() for line in run.stdout.splitlines()))
    here = {spec.ref: plan_of(vocab, fit, spec=spec).digest for spec in specs.values()}
    assert outputs[0] == outputs[1] == outputs[2] == here
    assert len(set(here.values())) == 13


def test_plan_is_immutable(vocab, fit):
    plan = plan_of(vocab, fit)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.digest = "0" * 16
    with pytest.raises(TypeError):
        plan.params["rounds"] = 99
    with pytest.raises(TypeError):
        plan.slots["lead"] = plan.slot("worker")
    with pytest.raises(TypeError):
        plan.outer["lr"] = 9.0
    with pytest.raises(AttributeError):
        plan.slot("worker").steps[0].params["inner_steps"].append(1)
    assert hash(plan) == hash(plan_of(vocab, fit))


def test_plan_substitutes_parameters(vocab, fit):
    plan = plan_of(vocab, fit, {"workers": 3, "inner_steps": 7, "rounds": 4})
    worker = plan.slot("worker")
    assert worker.count == (3, 3)
    assert dict(worker.steps[0].params) == {"inner_steps": 7, "keep_optimizer": True}
    assert dict(plan.stop) == {"rule": "rounds", "rounds": 4, "by": "lead"}
    assert dict(plan.params)["workers"] == 3


def test_plan_lookups(vocab, fit):
    plan = plan_of(vocab, fit, spec=load_spec("@beam/two-models@1.0.0"))
    assert [s.name for s in plan.slots_of("holder")] == ["holder_a", "holder_b"]
    assert [s.name for s in plan.slots_of("validator")] == []
    assert {lane.name for lane in plan.lanes_of("holder_b")} == {"grads_b", "model_b"}
    second = plan.slot("worker").steps[1]
    assert (second.lane, second.data_rule, second.params["model"]) == ("grads_b", "assigned", "b")
    with pytest.raises(KeyError, match="slots: "):
        plan.slot("miner")


def test_scored_subnet_digest_is_pinned(vocab, fit):
    """Peers of different releases must agree on this digest: if it moves, so must the version."""
    spec = load_spec("@beam/scored-subnet@2.0.0")
    assert plan_of(vocab, fit, spec=spec).digest == "658947bc637719fa"
    assert plan_of(vocab, fit, {"protocol": "abcd"}, spec=spec).digest == "27c04ed050cbfe6a"


def test_digest_is_sha256_of_the_canonical_form():
    import hashlib

    from subnet.topology.plan import plan_digest

    expected = hashlib.sha256(b'{"params":{"b":[1,2]},"spec":{"a":1}}').hexdigest()[:16]
    assert plan_digest({"a": 1}, {"b": (1, 2)}) == expected


def test_digest_ignores_spelled_out_schema_defaults(raw, vocab, fit):
    # writing a schema default out (or leaving it out) binds the same plan
    data = raw("scored-subnet")
    data["roles"]["holder"]["permissions"] = []
    data["roles"]["validator"]["steps"][0]["params"] = {}
    data["lanes"]["scores"]["commit_reveal"] = False
    data["roles"]["miner"]["steps"][0]["data_rule"] = None
    del data["roles"]["miner"]["min"]
    spec = parse_spec(data, "x")
    assert plan_of(vocab, fit, spec=spec).digest == "658947bc637719fa"
