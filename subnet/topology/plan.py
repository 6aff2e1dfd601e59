"""The compiled run plan: everything a neuron needs from its topology, immutable and hashed.

The plan lists slots, lanes, steps and rules, never members: roles ask the ``Roster`` (refreshed
by the Membership seam) who fills a slot, so members can join and leave without a new plan, and
every peer of a run computes the same ``digest``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


def freeze(value: Any) -> Any:
    """``value`` made read-only all the way down: dicts become mapping proxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON-able data back from ``freeze`` (for canonical hashing and printing)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def plan_digest(spec_content: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """16 hex digits of sha256 over the canonical spec (name and version included) and params."""
    body = {"spec": thaw(spec_content), "params": thaw(params)}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StepPlan:
    """One step of a slot's round, ready to run: its action, phase, lanes, gates and parameters."""

    action: str  # key into the role class's action registry
    # "upload" | "reveal" | "score" | "merge": window offsets [0, upload_deadline) |
    # [upload_deadline + 2, report_deadline) | [upload_deadline, report_deadline) |
    # [report_deadline, blocks)
    phase: str
    lane: str | None  # the lane it writes, if any
    gates: tuple[str, ...]  # gate names that must pass, in order, before the step runs
    params: Mapping[str, Any]
    reads: tuple[str, ...] = ()  # the lanes it reads
    data_rule: str | None = None  # this step's data rule when it differs from the plan's


@dataclass(frozen=True)
class SlotPlan:
    """A slot of the run: the role class that runs it, its member count, needs and steps."""

    name: str  # spec role name, e.g. "miner", "worker"
    role: str  # role class that runs it: "miner" | "validator" | "holder"
    count: tuple[int, int | None]  # (min, max) members; None = unbounded
    permissions: frozenset[str]  # required of every member in the slot
    holds: frozenset[str]  # e.g. {"model", "run.lead", "data.grant"}
    steps: tuple[StepPlan, ...]


@dataclass(frozen=True)
class LanePlan:
    """A named stream of signed objects of one kind, from writer slots to reader slots."""

    name: str  # "grads", "scores", "model", ...
    kind: str  # an ObjectKind value ("gradient", "scores", "model-manifest", ...)
    writers: tuple[str, ...]  # slot names
    readers: tuple[str, ...]  # slot names
    mode: str  # "broadcast" | "directed"
    commit_reveal: bool = False  # writers commit before the upload deadline, reveal after it


@dataclass(frozen=True)
class RunPlan:
    """An immutable compiled topology: slots, lanes, rules and the digest every peer agrees on."""

    topology: str
    version: str
    params: Mapping[str, Any]
    slots: Mapping[str, SlotPlan]
    lanes: Mapping[str, LanePlan]
    merge_weights: str
    data_rule: str
    aggregation: Mapping[str, Any]
    outer: Mapping[str, Any]
    stop: Mapping[str, Any]
    # 16 hex: hash of spec content + name + version + template params (defaults filled in); NOT
    # of the roster. Travels where the protocol config hash travels.
    digest: str
    tags: tuple[str, ...] = ()  # the spec's tags ("static" or "elastic", "rounds", ...)

    def __hash__(self) -> int:
        return hash(self.digest)

    @property
    def ref(self) -> str:
        """The exact topology reference: ``@scope/name@X.Y.Z``."""
        return f"{self.topology}@{self.version}"

    def slot(self, name: str) -> SlotPlan:
        """The slot called ``name``; KeyError naming the known slots if there is none."""
        try:
            return self.slots[name]
        except KeyError:
            raise KeyError(
                f"{self.ref} has no slot {name!r}; slots: {sorted(self.slots)}"
            ) from None

    def slots_of(self, role: str) -> list[SlotPlan]:
        """The slots a role class runs, in spec order (e.g. both holders of a two-model run)."""
        return [slot for slot in self.slots.values() if slot.role == role]

    def lanes_of(self, slot: str) -> list[LanePlan]:
        """The lanes ``slot`` writes or reads."""
        return [
            lane for lane in self.lanes.values() if slot in lane.writers or slot in lane.readers
        ]
