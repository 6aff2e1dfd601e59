"""Signed data grants: ``admit``, ``grant_data``, the ``granted`` data rule and its gates.

A member holding ``data.grant`` (the lead) admits the trainers present at the end of a round
(``admit``: a member who joined mid-run is in the next round, one who left is not waited for)
and grants each of them ``units`` data units for the next round (``grant_data``): one signed
object per round on the grants lane, ``{hotkey: [unit, ...]}``. A unit is one inner step's
samples (micro-batch x accumulation), consecutive units from a cursor over the train split, so
a round's grants never overlap. Trainers train on their units only (``granted``, also what
readers check receipts against), and only in a round they hold a grant for (gate ``granted``,
which never lapses); the merge waits for every granted member (``granted_uploads``). Grants
from a member without ``data.grant`` are ignored, whatever lane they are on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger

from ...data import TokenDataset
from ...storage.keys import ObjectKind
from ...wire import GrantMeta
from ..context import Admitting, Member
from ..runtime import Runtime
from ..steps import Step
from .presence import objects_present
from .signed import get_message, lane_of_kind, put_message


def unit_samples(rt: Runtime) -> int:
    """Samples in one data unit: one inner step's micro-batches."""
    inner = rt.cfg.protocol.inner
    return inner.micro_batch * inner.accumulation


def allocate(members: list[str], units: int, round_: int, total_units: int) -> dict[str, list[int]]:
    """Each member's ``units`` unit indices for ``round_``: disjoint, consecutive, cycling."""
    if total_units <= 0:
        raise ValueError("no data units to grant")
    start = round_ * len(members) * units
    return {
        hk: [(start + i * units + j) % total_units for j in range(units)]
        for i, hk in enumerate(sorted(members))
    }


def unit_ids(unit: int, size: int) -> list[int]:
    """The sample ids of data unit ``unit``."""
    return list(range(unit * size, (unit + 1) * size))


def grants_for(rt: Runtime, window: int) -> dict[str, list[int]]:
    """The units granted for ``window`` by the members holding ``data.grant`` (first wins)."""
    lane = lane_of_kind(rt, ObjectKind.DATA_GRANT)
    if lane is None:
        return {}
    out: dict[str, list[int]] = {}
    for grantor in rt.writers(lane):
        if not rt.roster.may(grantor, "data.grant"):
            continue  # a grant is an authority: only data.grant holders have it
        got = get_message(rt, grantor, ObjectKind.DATA_GRANT, window, lane, GrantMeta)
        if got is None:
            continue  # absent, or refused whole (``bad_grant``): that grantor's loss
        for hotkey, units in sorted(got.grants.items()):
            out.setdefault(hotkey, list(units))
    return out


def granted(rt: Runtime, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """Data rule: ``hotkey -> sample ids`` of the units granted to it for ``window``."""
    grants, size = grants_for(rt, window), unit_samples(rt)
    total = data.split_samples("train")
    return lambda hotkey: [
        i for u in grants.get(hotkey, []) for i in unit_ids(u, size) if i < total
    ]


def granted_gate(neuron: Member, step: Step) -> bool:
    """Gate: this member holds a grant for the round."""
    return bool(grants_for(neuron.rt, step.window).get(neuron.rt.hotkey))


def granted_uploads(neuron: Member, step: Step) -> bool:
    """Gate: every member granted data for the round has its upload on the lanes read."""
    rt = neuron.rt
    grants = grants_for(rt, step.window)
    for lane in step.plan.reads:
        if rt.plan.lanes[lane].kind != ObjectKind.GRADIENT.value:
            continue
        inbox = rt.inbox(lane)
        if not objects_present(inbox, ObjectKind.GRADIENT, step.window, sorted(grants), rt.reader):
            return False
    return True


def trainers(rt: Runtime) -> list[str]:
    """Members present in a slot writing a gradient lane, with ``runs.train``."""
    slots = {
        s
        for lane in rt.plan.lanes.values()
        if lane.kind == ObjectKind.GRADIENT.value
        for s in lane.writers
    }
    return sorted(
        {hk for s in slots for hk in rt.roster.in_slot(s) if rt.roster.may(hk, "runs.train")}
    )


@dataclass
class Admitted:
    """The ``admit`` action's result: who trains next round, who joined, who left."""

    window: int
    members: list[str]
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)


def admit(holder: Admitting, step: Step) -> Admitted:
    """Action: re-read membership now and admit the trainers present for the next round."""
    holder.reread()
    before = set(holder.admitted or [])
    members = trainers(holder.rt)
    result = Admitted(
        step.window, members, sorted(set(members) - before), sorted(before - set(members))
    )
    holder.admitted = members
    holder.rt.metrics.log(
        "admitted", window=step.window, members=members, joined=result.joined, left=result.left
    )
    logger.info(
        "round {}: admitted {} (joined {}, left {})",
        step.window + 1,
        len(members),
        len(result.joined),
        len(result.left),
    )
    return result


@dataclass
class Grant:
    """The ``grant_data`` action's result: the round granted and each member's units."""

    window: int
    units: dict[str, list[int]]
    key: str | None = None


def grant_data(holder: Admitting, step: Step) -> Grant:
    """Action: grant the next round's data units to the admitted trainers, one signed object."""
    rt = holder.rt
    members = holder.admitted if holder.admitted is not None else trainers(rt)
    units = int(step.params.get("units", 1))
    total = holder.data.split_samples("train") // unit_samples(rt)
    grants = allocate(members, units, step.window + 1, total)
    message = GrantMeta(grants={hk: tuple(u) for hk, u in grants.items()})
    key = put_message(rt, ObjectKind.DATA_GRANT, step.window + 1, step.lane, message)
    rt.metrics.log("grant", window=step.window + 1, units=grants)
    return Grant(step.window + 1, grants, key)
