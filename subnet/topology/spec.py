"""The topology spec schema: what one ``topologies/*.toml`` file may say (docs/topologies.md).

A spec is data: roles (slots) with counts, permissions and the ordered steps of a round; lanes
between slots; the merge-weights, data, aggregation, outer and stop rules; the parameters a
template may set. It is validated as a whole when it is parsed (every name it mentions exists,
every ``"$param"`` is declared), so the compiler only has to check it against a roster and the
registries of code that exists.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from subnet.membership.roster import PERMISSIONS

from .errors import PlanError
from .params import PARAM_NAME, ParamSpec, finite, ref_name, refs

# Window offsets, see subnet.clock.WindowClock; "reveal" (a commit-reveal lane's writers) starts
# one tick into the score phase.
Phase = Literal["upload", "reveal", "score", "merge"]
RoleClass = Literal["miner", "validator", "holder"]
LaneMode = Literal["broadcast", "directed"]
PHASES: tuple[str, ...] = ("upload", "reveal", "score", "merge")
ROLE_CLASSES: tuple[str, ...] = ("miner", "validator", "holder")
# What a slot may hold: the model, the run's lead, the authority to grant data, the consensus
# weights, and (for stateful workers) inner-optimizer state kept across rounds.
HOLDINGS = frozenset({"model", "run.lead", "data.grant", "weights", "optimizer"})
TOPOLOGY_NAME = re.compile(r"^@[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
IDENT = re.compile(r"^[a-z][a-z0-9_-]{0,47}$")  # slots, lanes, actions, gates, rules, tags

# A number, or "$param" naming an int parameter; strict, so a TOML `true` is not a count of 1.
Count = StrictInt | StrictStr


def _ident(cls: type, values: Any) -> Any:
    for value in [values] if isinstance(values, str) else values:
        if not IDENT.match(value):
            raise ValueError(f"{value!r} is not a name (lowercase letters, digits, _ and -)")
    return values


def _as_set(values: tuple[str, ...]) -> tuple[str, ...]:
    # Set-like lists are sorted so that the canonical form, and the digest, ignore file order.
    return tuple(sorted(set(values)))


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class StepSpec(_Frozen):
    """One step of a slot's round: a named action run in a phase, once its gates pass."""

    action: str
    phase: Phase
    lane: str | None = None  # the lane this step writes
    reads: tuple[str, ...] = ()  # lanes this step reads
    gates: tuple[str, ...] = ()  # checked in order before the step runs
    data_rule: str | None = None  # overrides the spec's data rule for this step
    params: dict[str, Any] = Field(default_factory=dict)

    _names = field_validator("action", "gates", "reads")(classmethod(_ident))

    @field_validator("data_rule")
    @classmethod
    def _rule(cls, value: str | None) -> str | None:
        return value if value is None else _ident(cls, value)

    @field_validator("reads")
    @classmethod
    def _sorted(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _as_set(value)


class RoleSpec(_Frozen):
    """A slot: which role class runs it, how many members fill it, what they need and hold."""

    role_class: RoleClass = Field(alias="class")
    doc: str = ""
    min: Count = 1
    max: Count | None = None  # None: unbounded
    permissions: tuple[str, ...] = ()
    holds: tuple[str, ...] = ()
    steps: tuple[StepSpec, ...] = Field(min_length=1)

    @field_validator("permissions", "holds")
    @classmethod
    def _sorted(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _as_set(value)

    @field_validator("permissions")
    @classmethod
    def _known_permissions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - PERMISSIONS)
        if unknown:
            raise ValueError(f"unknown permission {unknown[0]!r}; known: {sorted(PERMISSIONS)}")
        return value

    @field_validator("holds")
    @classmethod
    def _known_holdings(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - HOLDINGS)
        if unknown:
            raise ValueError(f"unknown holding {unknown[0]!r}; known: {sorted(HOLDINGS)}")
        return value

    @field_validator("steps")
    @classmethod
    def _phase_order(cls, steps: tuple[StepSpec, ...]) -> tuple[StepSpec, ...]:
        order = [PHASES.index(step.phase) for step in steps]
        if order != sorted(order):
            raise ValueError("steps must be listed in phase order (upload, reveal, score, merge)")
        return steps


class LaneSpec(_Frozen):
    """A named stream of signed objects of one kind from writer slots to reader slots."""

    kind: str  # an ObjectKind value: "gradient", "scores", "model-manifest", ...
    writers: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()
    mode: LaneMode
    doc: str = ""
    # Writers commit to each object's digest before the upload deadline and write the object
    # itself only after it (a step in the "reveal" phase): nothing on the lane can be copied
    # in time, whoever reaches a bucket first.
    commit_reveal: bool = False

    _names = field_validator("writers", "readers")(classmethod(_ident))

    @field_validator("writers", "readers")
    @classmethod
    def _sorted(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _as_set(value)


class TopologySpec(_Frozen):
    """One versioned topology, as a ``topologies/*.toml`` file states it."""

    name: str
    version: str
    summary: str = Field(min_length=1)
    tags: tuple[str, ...]
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    roles: dict[str, RoleSpec] = Field(min_length=1)
    lanes: dict[str, LaneSpec] = Field(default_factory=dict)
    merge_weights: str
    data_rule: str
    aggregation: dict[str, Any]
    outer: dict[str, Any]
    stop: dict[str, Any]

    _names = field_validator("merge_weights", "data_rule", "tags")(classmethod(_ident))

    @property
    def ref(self) -> str:
        """The exact reference a template binds: ``@beam/fedavg@1.0.0``."""
        return f"{self.name}@{self.version}"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOPOLOGY_NAME.match(value):
            raise ValueError(f"{value!r} is not a topology name like '@beam/fedavg'")
        return value

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not SEMVER.match(value):
            raise ValueError(f"{value!r} is not a semantic version like '1.0.0'")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len({"static", "elastic"} & set(value)) != 1:
            raise ValueError("tags must include exactly one of 'static' and 'elastic'")
        return _as_set(value)

    @model_validator(mode="after")
    def _consistent(self) -> TopologySpec:
        for name in [*self.params, *self.roles, *self.lanes]:
            if not PARAM_NAME.match(name):
                raise ValueError(f"{name!r} is not a name (lowercase letters, digits and _)")
        for table, key in ((self.aggregation, "rule"), (self.outer, "name"), (self.stop, "rule")):
            if not isinstance(table.get(key), str) or not IDENT.match(table[key]):
                raise ValueError(
                    f"aggregation needs 'rule', outer 'name', stop 'rule' (missing {key!r})"
                )
        steps = [step.params for role in self.roles.values() for step in role.steps]
        if not finite([self.aggregation, self.outer, self.stop, *steps]):
            raise ValueError("values must be finite numbers (no nan or inf)")
        by = self.stop.get("by")
        if by is not None and by not in self.roles:
            raise ValueError(f"stop.by names slot {by!r}, which is not a role")
        self._check_lanes()
        self._check_counts()
        self._check_refs()
        return self

    def _check_lanes(self) -> None:
        for lane_name, lane in self.lanes.items():
            for slot in (*lane.writers, *lane.readers):
                if slot not in self.roles:
                    raise ValueError(f"lane {lane_name!r} names slot {slot!r}, which is not a role")
        for slot, role in self.roles.items():
            for step in role.steps:
                lane = self.lanes.get(step.lane) if step.lane else None
                if step.lane and (lane is None or slot not in lane.writers):
                    raise ValueError(
                        f"{slot}.{step.action} writes lane {step.lane!r}, which does not list {slot!r} as a writer"
                    )
                for read in step.reads:
                    if read not in self.lanes or slot not in self.lanes[read].readers:
                        raise ValueError(
                            f"{slot}.{step.action} reads lane {read!r}, which does not list {slot!r} as a reader"
                        )

    def _check_counts(self) -> None:
        for slot, role in self.roles.items():
            for bound in (role.min, role.max):
                name = ref_name(bound)
                if isinstance(bound, str) and (
                    name is None or name not in self.params or self.params[name].type != "int"
                ):
                    raise ValueError(
                        f"slot {slot!r}: count {bound!r} must be a number or '$name' of an int parameter"
                    )
                if isinstance(bound, int) and bound < 0:
                    raise ValueError(f"slot {slot!r}: count {bound} must be >= 0")
            if isinstance(role.min, int) and isinstance(role.max, int) and role.min > role.max:
                raise ValueError(f"slot {slot!r}: min {role.min} > max {role.max}")

    def _check_refs(self) -> None:
        used = refs([self.aggregation, self.outer, self.stop])
        for role in self.roles.values():
            used |= refs([role.min, role.max, *(step.params for step in role.steps)])
        undeclared = sorted(used - set(self.params))
        if undeclared:
            raise ValueError(f"'${undeclared[0]}' names no declared parameter")

    def canonical(self) -> dict[str, Any]:
        """The spec as plain JSON-able data, independent of file layout, order and comments.

        Fields left at their defaults are omitted, so adding an optional field to the schema
        later leaves the digests of existing specs (and of the runs that pin them) unchanged.
        """
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def parse_spec(data: dict[str, Any], source: str) -> TopologySpec:
    """A spec from parsed TOML; PlanError ``bad_spec`` with one line naming ``source`` if invalid."""
    try:
        return TopologySpec.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "spec"
        message = first["msg"].removeprefix("Value error, ")
        raise PlanError("bad_spec", f"{source}: {where}: {message}") from None
