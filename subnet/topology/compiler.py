"""spec + template + roster + registries -> RunPlan, or a PlanError before anything runs.

The compiler checks, in this order: the template binds this exact spec; the template's parameters
(known, typed, in range); every action, gate and rule the spec names exists in the registries;
every lane has a writer and a reader; the roster fills every slot within its count, only with
members holding the slot's permissions. It then substitutes the parameters and freezes the plan.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from subnet.membership.roster import Roster

from .errors import PlanError
from .params import resolve, substitute
from .plan import LanePlan, RunPlan, SlotPlan, StepPlan, freeze, plan_digest
from .spec import TopologySpec
from .template import Template, parse_ref


@dataclass(frozen=True)
class Registries:
    """What code exists, by name; the compiler checks a spec against it.

    The first four are the contract with the neuron side. The optional ones are checked only
    when given (None: not checked), so a caller may register as much as it knows. Only ``in``
    is used, so a plain dict from name to code serves as well as a frozenset of names.
    """

    actions: Mapping[str, frozenset[str]]  # role class ("miner"|"validator"|"holder") -> actions
    gates: frozenset[str]
    merge_weights: frozenset[str]
    data_rules: frozenset[str]
    stop_rules: frozenset[str] | None = None
    aggregation_rules: frozenset[str] | None = None
    outer_rules: frozenset[str] | None = None
    lane_kinds: frozenset[str] | None = None  # ObjectKind values
    # role class -> action -> the pydantic model of its step's ``params`` (extra keys forbidden)
    step_params: Mapping[str, Mapping[str, type[BaseModel]]] | None = None
    # the keys an [aggregation] / [outer] table may hold (anything else is a misspelling)
    aggregation_keys: frozenset[str] | None = None
    outer_keys: frozenset[str] | None = None


def spec_vocabulary(specs: Iterable[TopologySpec]) -> Registries:
    """The registries that exactly cover what ``specs`` name (for tests and completeness checks)."""
    actions: dict[str, set[str]] = {"miner": set(), "validator": set(), "holder": set()}
    gates: set[str] = set()
    merge, data, stop, agg, outer, kinds = set(), set(), set(), set(), set(), set()
    for spec in specs:
        for role in spec.roles.values():
            for step in role.steps:
                actions[role.role_class].add(step.action)
                gates.update(step.gates)
                if step.data_rule:
                    data.add(step.data_rule)
        merge.add(spec.merge_weights)
        data.add(spec.data_rule)
        stop.add(spec.stop["rule"])
        agg.add(spec.aggregation["rule"])
        outer.add(spec.outer["name"])
        kinds.update(lane.kind for lane in spec.lanes.values())
    return Registries(
        actions={k: frozenset(v) for k, v in actions.items()},
        gates=frozenset(gates),
        merge_weights=frozenset(merge),
        data_rules=frozenset(data),
        stop_rules=frozenset(stop),
        aggregation_rules=frozenset(agg),
        outer_rules=frozenset(outer),
        lane_kinds=frozenset(kinds),
    )


def _check_binding(spec: TopologySpec, template: Template) -> None:
    name, version = parse_ref(template.topology)
    if name != spec.name:
        raise PlanError(
            "unknown_topology", f"template binds {template.topology}, spec is {spec.ref}"
        )
    if version != spec.version:
        raise PlanError(
            "unknown_version", f"template binds {template.topology}, spec is {spec.ref}"
        )


def _rule_gap(kind: str, name: str, known: Container[str] | None) -> list[PlanError]:
    if known is None or name in known:
        return []
    return [PlanError("unknown_rule", f"{kind} rule {name!r} is not registered")]


def _key_gaps(
    ref: str, table: str, entries: Mapping[str, object], known: frozenset[str] | None
) -> list[PlanError]:
    """A key of ``[table]`` that nothing reads: refused by name, not dropped silently."""
    if known is None:
        return []
    return [
        PlanError(
            "unknown_param",
            f"{ref}: [{table}] key {key!r} is not read; known: {', '.join(sorted(known))}",
        )
        for key in entries
        if key not in known
    ]


def registry_gaps(spec: TopologySpec, reg: Registries) -> list[PlanError]:
    """Every action, gate and rule ``spec`` names that ``reg`` lacks, in spec order.

    ``compile_plan`` raises the first; a completeness test can list them all.
    """
    gaps: list[PlanError] = []
    for slot, role in spec.roles.items():
        known = reg.actions.get(role.role_class, frozenset())
        for step in role.steps:
            if step.action not in known:
                message = f"slot {slot!r}: action {step.action!r} is not registered for role class {role.role_class!r}"
                gaps.append(PlanError("unknown_action", message))
            for gate in step.gates:
                if gate not in reg.gates:
                    message = f"slot {slot!r}: gate {gate!r} of {step.action!r} is not registered"
                    gaps.append(PlanError("unknown_gate", message))
            if step.data_rule:
                gaps += _rule_gap("data", step.data_rule, reg.data_rules)
            gaps += _param_gaps(spec, slot, role.role_class, step.action, step.params, reg)
    gaps += _rule_gap("merge-weights", spec.merge_weights, reg.merge_weights)
    gaps += _rule_gap("data", spec.data_rule, reg.data_rules)
    gaps += _rule_gap("stop", spec.stop["rule"], reg.stop_rules)
    gaps += _rule_gap("aggregation", spec.aggregation["rule"], reg.aggregation_rules)
    gaps += _rule_gap("outer", spec.outer["name"], reg.outer_rules)
    gaps += _key_gaps(spec.ref, "aggregation", spec.aggregation, reg.aggregation_keys)
    gaps += _key_gaps(spec.ref, "outer", spec.outer, reg.outer_keys)
    for lane_name, lane in spec.lanes.items():
        if reg.lane_kinds is not None and lane.kind not in reg.lane_kinds:
            message = f"lane {lane_name!r}: object kind {lane.kind!r} is not registered"
            gaps.append(PlanError("unknown_rule", message))
    return gaps


def _params_model(reg: Registries, role_class: str, action: str) -> type[BaseModel] | None:
    if reg.step_params is None:
        return None
    return reg.step_params.get(role_class, {}).get(action)


def _param_gaps(
    spec: TopologySpec,
    slot: str,
    role_class: str,
    action: str,
    params: Mapping[str, Any],
    reg: Registries,
) -> list[PlanError]:
    """A key of a step's ``params`` that its action's model does not name (a misspelling)."""
    model = _params_model(reg, role_class, action)
    if model is None:
        return []
    known = ", ".join(sorted(model.model_fields)) or "none"
    return [
        PlanError(
            "unknown_param",
            f"{spec.ref}: slot {slot!r}, step {action!r}: unknown params key {key!r} "
            f"(known: {known})",
        )
        for key in sorted(set(params) - set(model.model_fields))
    ]


def _check_step_params(spec: TopologySpec, slots: Mapping[str, SlotPlan], reg: Registries) -> None:
    """Each step's substituted ``params`` against its action's model (types, ranges)."""
    for name, slot in slots.items():
        for step in slot.steps:
            model = _params_model(reg, slot.role, step.action)
            if model is None:
                continue
            try:
                model.model_validate(dict(step.params))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise PlanError(
                    "bad_parameter",
                    f"{spec.ref}: slot {name!r}, step {step.action!r}: params {where}: "
                    f"{first['msg']}",
                ) from None


def _check_lane_shape(spec: TopologySpec) -> None:
    for lane_name, lane in spec.lanes.items():
        written = any(
            step.lane == lane_name for slot in lane.writers for step in spec.roles[slot].steps
        )
        if not written:
            raise PlanError(
                "lane_unwritten", f"lane {lane_name!r}: no step of a writer slot writes it"
            )
        if not lane.readers:
            raise PlanError("lane_unread", f"lane {lane_name!r}: no slot reads it")
        if lane.commit_reveal:
            _check_reveal(spec, lane_name)


def _check_reveal(spec: TopologySpec, lane_name: str) -> None:
    """A commit-reveal lane carries uploads, every writer slot reveals what it committed, and a
    step reading it before the merge phase waits for the reveals (gate ``revealed``): without
    it, a scorer would score whatever was revealed by its first tick and call the rest late."""
    lane = spec.lanes[lane_name]
    if lane.kind != "gradient":
        raise PlanError(
            "bad_spec",
            f"lane {lane_name!r}: commit_reveal is for gradient lanes, not {lane.kind!r}",
        )
    for slot in lane.writers:
        steps = spec.roles[slot].steps
        if not any(s.lane == lane_name and s.phase == "reveal" for s in steps):
            raise PlanError(
                "bad_spec",
                f"lane {lane_name!r} is commit_reveal but slot {slot!r} has no step in phase "
                "'reveal' writing it",
            )
    for slot, role in spec.roles.items():
        for step in role.steps:
            if lane_name in step.reads and step.phase != "merge" and "revealed" not in step.gates:
                raise PlanError(
                    "bad_spec",
                    f"lane {lane_name!r} is commit_reveal but slot {slot!r} reads it in phase "
                    f"{step.phase!r} without the gate 'revealed'",
                )


def _check_lane_members(spec: TopologySpec, roster: Roster) -> None:
    # A slot may have a minimum of 0; a lane whose every reader slot is empty has no audience.
    for lane_name, lane in spec.lanes.items():
        if not any(roster.in_slot(slot) for slot in lane.writers):
            raise PlanError(
                "lane_unwritten",
                f"lane {lane_name!r}: no member fills a writer slot ({', '.join(lane.writers)})",
            )
        if not any(roster.in_slot(slot) for slot in lane.readers):
            raise PlanError(
                "lane_unread",
                f"lane {lane_name!r}: no member fills a reader slot ({', '.join(lane.readers)})",
            )


def _check_roster(
    spec: TopologySpec, counts: Mapping[str, tuple[int, int | None]], roster: Roster
) -> None:
    for member in roster.members:
        extra = sorted(set(member.slots) - set(spec.roles))
        if extra:
            raise PlanError(
                "unknown_slot",
                f"member {member.hotkey} is in slot {extra[0]!r}, which {spec.ref} does not have",
            )
    for slot, role in spec.roles.items():
        hotkeys = roster.in_slot(slot)
        low, high = counts[slot]
        if len(hotkeys) < low:
            raise PlanError(
                "role_unfilled", f"slot {slot!r} needs at least {low} member(s), has {len(hotkeys)}"
            )
        if high is not None and len(hotkeys) > high:
            raise PlanError(
                "role_overfilled",
                f"slot {slot!r} takes at most {high} member(s), has {len(hotkeys)}",
            )
        for hotkey in hotkeys:
            missing = sorted(set(role.permissions) - set(roster.get(hotkey).permissions))
            if missing:
                raise PlanError(
                    "missing_permission",
                    f"member {hotkey} in slot {slot!r} lacks permission {missing[0]!r}",
                )


def _slot_plan(
    name: str, spec: TopologySpec, count: tuple[int, int | None], params: dict[str, Any]
) -> SlotPlan:
    role = spec.roles[name]
    steps = tuple(
        StepPlan(
            action=step.action,
            phase=step.phase,
            lane=step.lane,
            gates=step.gates,
            params=freeze(substitute(step.params, params)),
            reads=step.reads,
            data_rule=step.data_rule,
        )
        for step in role.steps
    )
    return SlotPlan(
        name, role.role_class, count, frozenset(role.permissions), frozenset(role.holds), steps
    )


def _counts(spec: TopologySpec, params: dict[str, Any]) -> dict[str, tuple[int, int | None]]:
    counts = {
        slot: (substitute(role.min, params), substitute(role.max, params))
        for slot, role in spec.roles.items()
    }
    for slot, (low, high) in counts.items():
        if high is not None and low > high:
            raise PlanError(
                "bad_parameter", f"slot {slot!r}: min {low} > max {high} with these parameters"
            )
    return counts


def compile_plan(
    spec: TopologySpec, template: Template, roster: Roster, registries: Registries
) -> RunPlan:
    """The immutable, hashed plan for running ``spec`` as ``template`` says with ``roster``.

    Raises PlanError (with ``.reason``) for the first thing that would stop the run.
    """
    _check_binding(spec, template)
    params = resolve(spec.params, template.params)
    gaps = registry_gaps(spec, registries)
    if gaps:
        raise gaps[0]
    counts = _counts(spec, params)
    _check_lane_shape(spec)
    _check_roster(spec, counts, roster)
    _check_lane_members(spec, roster)
    lanes = {
        name: LanePlan(name, lane.kind, lane.writers, lane.readers, lane.mode, lane.commit_reveal)
        for name, lane in spec.lanes.items()
    }
    slots = {name: _slot_plan(name, spec, counts[name], params) for name in spec.roles}
    _check_step_params(spec, slots, registries)
    return RunPlan(
        topology=spec.name,
        version=spec.version,
        params=freeze(params),
        slots=freeze(slots),
        lanes=freeze(lanes),
        merge_weights=spec.merge_weights,
        data_rule=spec.data_rule,
        aggregation=freeze(substitute(spec.aggregation, params)),
        outer=freeze(substitute(spec.outer, params)),
        stop=freeze(substitute(spec.stop, params)),
        digest=plan_digest(spec.canonical(), params),
        tags=spec.tags,
    )
