"""The real registries cover every name the builtin topology specs use.

Parametrized over every spec in ``topologies/``: each action (per role class), gate, data rule,
merge-weights, aggregation, outer and stop rule, and lane kind it names must have code behind
it, and the spec must compile against ``REGISTRIES`` with a roster that fills its slots. Names a
spec uses before their code lands are listed in ``PENDING``, as strict expected failures: the
day one lands, its test passes and the entry must go.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from subnet.membership import Member, Roster
from subnet.neuron.registry import REGISTRIES, ROLE_CLASSES
from subnet.topology import PlanError, Template, TopologySpec, builtin_specs, compile_plan
from subnet.topology.params import resolve, substitute
from subnet.topology.spec import parse_spec

# (what, name) -> the issue it lands with. Empty: every name the builtin specs use has code (a
# name a new spec adds before its code lands goes here as a strict expected failure).
PENDING: dict[tuple[str, str], str] = {}


def requirements(spec: TopologySpec) -> list[tuple[str, str]]:
    """Every (registry, name) the spec needs; registry is ``action:<role class>`` or a rule kind."""
    needs: set[tuple[str, str]] = set()
    for role in spec.roles.values():
        for step in role.steps:
            needs.add((f"action:{role.role_class}", step.action))
            needs.update(("gate", gate) for gate in step.gates)
            if step.data_rule:
                needs.add(("data", step.data_rule))
    needs |= {("merge_weights", spec.merge_weights), ("data", spec.data_rule),
              ("stop", spec.stop["rule"]), ("aggregation", spec.aggregation["rule"]),
              ("outer", spec.outer["name"])}  # fmt: skip
    needs.update(("lane_kind", lane.kind) for lane in spec.lanes.values())
    return sorted(needs)


def registered(what: str, name: str) -> bool:
    """Whether ``REGISTRIES`` has ``name`` under ``what``."""
    if what.startswith("action:"):
        return name in REGISTRIES.actions.get(what.split(":", 1)[1], frozenset())
    table = {"gate": REGISTRIES.gates, "merge_weights": REGISTRIES.merge_weights,
             "data": REGISTRIES.data_rules, "stop": REGISTRIES.stop_rules,
             "aggregation": REGISTRIES.aggregation_rules, "outer": REGISTRIES.outer_rules,
             "lane_kind": REGISTRIES.lane_kinds}  # fmt: skip
    return name in table[what]


def _pending_mark(keys: list[tuple[str, str]]) -> list:
    missing = [k for k in keys if k in PENDING]
    if not missing:
        return []
    what, name = missing[0]
    return [
        pytest.mark.xfail(strict=True, reason=f"{what} {name} lands with {PENDING[missing[0]]}")
    ]


CASES = [
    pytest.param(spec.ref, what, name, marks=_pending_mark([(what, name)]),
                 id=f"{spec.ref}-{what}-{name}")
    for spec in builtin_specs()
    for what, name in requirements(spec)
]  # fmt: skip


@pytest.mark.parametrize(("ref", "what", "name"), CASES)
def test_every_name_a_spec_uses_is_registered(ref, what, name):
    assert registered(what, name), f"{ref} needs {what} {name!r}, which no code registers"


def full_roster(spec: TopologySpec) -> Roster:
    """Members filling every slot of ``spec`` to its minimum (at least one), with its permissions."""
    members, n = [], 0
    values = resolve(spec.params, {})
    for slot, role in spec.roles.items():
        for _ in range(max(1, substitute(role.min, values))):
            members.append(Member(f"member-{n}", frozenset({slot}), frozenset(role.permissions)))
            n += 1
    return Roster(tuple(members))


SPECS = [
    pytest.param(spec, marks=_pending_mark(requirements(spec)), id=spec.ref)
    for spec in builtin_specs()
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_builtin_spec_compiles_against_the_real_registries(spec):
    plan = compile_plan(spec, Template(topology=spec.ref), full_roster(spec), REGISTRIES)
    for slot in plan.slots.values():
        actions = ROLE_CLASSES[slot.role].actions
        assert all(step.action in actions for step in slot.steps)


def test_every_registered_action_is_a_method_of_its_role_class():
    for name, cls in ROLE_CLASSES.items():
        assert cls.role == name
        for action, method in cls.actions.items():
            assert getattr(cls, method.__name__) is method, (name, action)


def _with_step_params(ref: str, slot: str, index: int, params: dict) -> TopologySpec:
    """Builtin spec ``ref`` as a file would state it, with one step's ``params`` replaced."""
    spec = next(s for s in builtin_specs() if s.ref == ref)
    data = spec.model_dump(by_alias=True, exclude_none=True)
    data["roles"][slot]["steps"][index]["params"] = params
    return parse_spec(data, "test")


def test_a_misspelled_step_parameter_is_a_compile_error_naming_the_spec_and_key():
    spec = _with_step_params(
        "@beam/diloco@1.0.0", "worker", 0, {"inner_steps": 3, "keep_optimiser": True}
    )
    with pytest.raises(PlanError) as error:
        compile_plan(spec, Template(topology=spec.ref), full_roster(spec), REGISTRIES)
    assert error.value.reason == "unknown_param"
    assert "@beam/diloco@1.0.0" in str(error.value) and "'keep_optimiser'" in str(error.value)


@pytest.mark.parametrize(("table", "key"), [("outer", "momentun"), ("aggregation", "clip")])
def test_a_misspelled_outer_or_aggregation_key_is_a_compile_error_naming_it(table, key):
    spec = next(s for s in builtin_specs() if s.ref == "@beam/diloco@1.0.0")
    data = spec.model_dump(by_alias=True, exclude_none=True)
    data[table][key] = 0.5
    spec = parse_spec(data, "test")
    with pytest.raises(PlanError) as error:
        compile_plan(spec, Template(topology=spec.ref), full_roster(spec), REGISTRIES)
    assert error.value.reason == "unknown_param"
    assert f"[{table}] key {key!r} is not read" in str(error.value), error.value
    assert "@beam/diloco@1.0.0" in str(error.value)


def test_a_step_parameter_of_the_wrong_type_is_a_compile_error():
    spec = _with_step_params("@beam/diloco@1.0.0", "worker", 0, {"inner_steps": "many"})
    with pytest.raises(PlanError) as error:
        compile_plan(spec, Template(topology=spec.ref), full_roster(spec), REGISTRIES)
    assert error.value.reason == "bad_parameter" and "inner_steps" in str(error.value)


@pytest.mark.parametrize("role", sorted(ROLE_CLASSES))
def test_every_action_has_a_params_model_that_forbids_unknown_keys(role):
    for action, model in REGISTRIES.step_params[role].items():
        with pytest.raises(ValidationError):
            model.model_validate({"no_such_key": 1})
        assert action in ROLE_CLASSES[role].actions
