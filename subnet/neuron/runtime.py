"""``Runtime``: everything a neuron talks to, as seams, plus the compiled run plan.

Which seams a runtime holds decides the mode, never a flag: subnet mode builds it with a block
clock, the chain's membership and chain weights; a room with a time clock and its roster (both
through the one builder, ``subnet.neuron.seams``); a unit test with a manual clock, a static
roster and an in-memory store. Nothing here knows about a chain.

A member writes on a lane through ``outbox(lane)`` and reads a lane through ``inbox(lane)``
(``subnet.neuron.lanes``): the runtime binds its store, signer, run and plan into them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import Clock, WindowClock
from ..config import BeamConfig, ConfigError
from ..data import TokenDataset
from ..errors import NotReady
from ..membership import Membership, Readers, Roster
from ..monitor import MetricsSink
from ..storage.base import ObjectNotFound, ObjectStore
from ..storage.counting import ByteMeter
from ..storage.keys import dataset_prefix
from ..topology import LanePlan, RunPlan, SlotPlan
from ..weights import NoWeights, WeightSink
from ..wire import Signer
from .lanes import Inbox, Outbox

# A value nobody could know before the tick (the chain's drand pulse after it): the draw of checks.
Beacon = Callable[[int], str | None]


@dataclass
class Runtime:
    """A neuron's handles on the outside world, and the plan it runs."""

    cfg: BeamConfig
    role: str
    signer: Signer  # this node's hotkey: signs every object it sends
    store: ObjectStore  # this node's own bucket
    membership: Membership
    clock: Clock
    plan: RunPlan
    metrics: MetricsSink
    state_dir: Path
    weights: WeightSink = field(default_factory=NoWeights)
    meter: ByteMeter = field(default_factory=ByteMeter)  # bytes through store and readers
    # What the clock can do beyond ticking, declared by whoever built it (``seams.Seams``):
    beacon: Beacon | None = None  # None: no beacon (a room), so no checks of training
    tick_seconds: float | None = None  # nominal tick length when ticks are time (None: manual)
    windows: WindowClock = field(init=False)

    def __post_init__(self) -> None:
        self.windows = WindowClock(self.cfg.protocol.window)

    @property
    def hotkey(self) -> str:
        """This neuron's ss58 hotkey."""
        return self.signer.ss58_address

    @property
    def max_bytes(self) -> int:
        """The largest object this neuron downloads."""
        return int(self.cfg.protocol.max_upload_mb * 1024 * 1024)

    @property
    def roster(self) -> Roster:
        """The membership's latest snapshot."""
        return self.membership.roster

    @property
    def readers(self) -> Readers:
        """Readers of the members' buckets."""
        return self.membership.readers

    def outbox(self, lane: str | None) -> Outbox:
        """Where this member writes its objects on ``lane`` (None: each kind's default lane)."""
        return Outbox(self.store, self.signer, self.cfg.protocol.run, lane, self.plan.digest)

    def inbox(self, lane: str | None) -> Inbox:
        """How this member reads the others' objects on ``lane`` (None: each kind's default)."""
        return Inbox(self.cfg.protocol.run, lane, self.plan.digest)

    def reader(self, hotkey: str) -> ObjectStore | None:
        """Where ``hotkey``'s objects are read: our own store for ourselves, else its reader."""
        return self.store if hotkey == self.hotkey else self.readers.get(hotkey)

    def slot_of(self, role: str) -> SlotPlan:
        """The plan's slot this neuron runs as role class ``role``.

        The one its roster entry names; else the only slot of that class. A member not (yet)
        in the slot still runs it (a validator before its permit), but its work does not count.
        """
        slots = self.plan.slots_of(role)
        member = self.roster.get(self.hotkey)
        mine = [s for s in slots if member is not None and s.name in member.slots]
        if mine:
            return mine[0]
        if len(slots) == 1:
            return slots[0]
        raise NotReady(
            f"{self.plan.ref} has {len(slots)} slots of role class {role!r} "
            f"({', '.join(s.name for s in slots) or 'none'}) and hotkey {self.hotkey} is in none"
        )

    def lane(self, name: str) -> LanePlan:
        """The plan's lane ``name``."""
        return self.plan.lanes[name]

    def read_lane(self, slot: SlotPlan, kind: str) -> LanePlan:
        """The lane of object kind ``kind`` that ``slot``'s steps read (or write)."""
        for step in slot.steps:
            for name in (*step.reads, *([step.lane] if step.lane else [])):
                if self.plan.lanes[name].kind == kind:
                    return self.plan.lanes[name]
        for lane in self.plan.lanes.values():  # a lane the slot reads outside its steps (the
            if lane.kind == kind and slot.name in lane.readers:  # gossip workers' final model)
                return lane
        raise KeyError(f"slot {slot.name} of {self.plan.ref} touches no lane of kind {kind}")

    def lane_read(self, slot: SlotPlan, kind: str) -> str | None:
        """The name of the lane of ``kind`` that ``slot`` touches, or None if it touches none."""
        try:
            return self.read_lane(slot, kind).name
        except KeyError:
            return None

    def writers(self, lane: str) -> list[str]:
        """Hotkeys of the members filling the writer slots of ``lane``, sorted."""
        slots = self.plan.lanes[lane].writers
        return sorted({hk for slot in slots for hk in self.roster.in_slot(slot)})

    def source_of(self, lane: str) -> str:
        """The one member writing ``lane`` (a model lane's holder); NotReady if there is none."""
        writers = self.writers(lane)
        if not writers:
            raise NotReady(f"no member writes lane {lane!r} yet")
        return writers[0]

    def data_owner(self) -> str:
        """The member whose bucket serves the dataset: the data-grant slot's, else the run
        lead's, else the model's (gossip workers hold their own models, not the data)."""
        return self.data_source()[1]

    def data_source(self) -> tuple[str, str]:
        """``(slot, member)`` serving the dataset (see :meth:`data_owner`); NotReady if none."""
        for hold in ("data.grant", "run.lead", "model"):
            for slot in self.plan.slots.values():
                if hold in slot.holds and self.roster.in_slot(slot.name):
                    return slot.name, self.roster.in_slot(slot.name)[0]
        raise NotReady("no member holds the model or a data grant yet")

    def data_prefix(self) -> str:
        """Where in the data owner's bucket the dataset lives: the plan's ``prefix`` (a step
        parameter: ``@beam/fedavg-data``'s ``data_prefix``), else the protocol dataset's
        default place. ``ConfigError`` for a prefix that is not a plain key prefix."""
        for slot in self.plan.slots.values():
            for step in slot.steps:
                if "prefix" in step.params:
                    return checked_prefix(str(step.params["prefix"]))
        return dataset_prefix(self.cfg.protocol.dataset)

    def dataset(self) -> TokenDataset:
        """The protocol's dataset, read from its owner's bucket; NotReady (with why) if absent."""
        (slot, owner), name = self.data_source(), self.cfg.protocol.dataset
        store = self.reader(owner)
        if store is None:
            raise NotReady(
                f"the member {owner[:8]} of slot {slot} (it serves the dataset) has no readable "
                f"bucket yet; check that it runs and who fills slot {slot}"
            )
        try:
            return TokenDataset(
                StoreSource(store, self.data_prefix(), self.max_bytes), self.cfg.protocol.seq_len
            )
        except ObjectNotFound:
            raise NotReady(
                f"dataset {name} is not in the bucket of slot {slot}'s member {owner[:8]} yet; "
                "it publishes it when it starts"
            ) from None


def checked_prefix(prefix: str) -> str:
    """``prefix`` if it is a plain relative key prefix ending in ``/`` (``data/``, ``a/b/``)."""
    if not PREFIX.fullmatch(prefix) or ".." in prefix.split("/"):
        raise ConfigError(
            f"the run's data prefix must be like 'data/' (lowercase segments, "
            f"each ending in '/'): {prefix!r}; fix the template's parameter"
        )
    return prefix


PREFIX = re.compile(r"([a-z0-9][a-z0-9._-]{0,62}/){1,8}")


class StoreSource:
    """A read-only view of one prefix of an ObjectStore, as the data module's ``Source``."""

    def __init__(self, store: ObjectStore, prefix: str, max_bytes: int) -> None:
        self.store, self.prefix, self.max_bytes = store, prefix, max_bytes

    def get(self, key: str) -> bytes:
        """The bytes of ``prefix + key`` (bounded by ``max_bytes``)."""
        return self.store.get(self.prefix + key, self.max_bytes)
