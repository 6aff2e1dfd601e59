"""``RoomMembership``: the roster, readers and permissions of one run in a room, from its manifest.

Each refresh follows the room's manifest versions (every one verified: see
:mod:`subnet.room.store`), applies members' signed leaves at once, and rebuilds:

- the **roster**: each member in the slots its invite named that exist in the run's topology,
  *only while it holds what the slot needs* (the slot's permissions; ``run.lead`` or
  ``data.grant`` where the slot holds them; ``data.grant`` for the slot that serves the data). A member that lacks one (a revoked ``runs.score``)
  drops out of the slot, with a logged reason, so every role ignores its work from the next
  window on: the holder its scores, validators and the holder its uploads;
- the **readers**: this node gets a reader for a member's bucket only where it may read a lane
  that member writes: it fills a reader slot of the lane, or the lane is broadcast and this node
  holds ``runs.observe``; every node reads the buckets of ``data.grant`` holders (the data).

Non-members are in neither. What this enforces is what an honest node reads and counts; see
docs/rooms.md for which checks are cryptographic and which rest on storage credentials.
"""

from __future__ import annotations

from loguru import logger

from ..errors import SetupError
from ..membership.roster import Member, Roster
from ..storage.base import ObjectStore, StorageError
from ..storage.readers import ReaderPool
from ..topology import TopologySpec
from .errors import RoomError
from .manifest import Manifest, RoomRun
from .ops import left_members
from .store import RoomStore

# A slot that holds one of these needs the member to hold the permission of the same name.
HOLD_PERMISSIONS = ("run.lead", "data.grant")


def slot_needs(spec: TopologySpec) -> dict[str, frozenset[str]]:
    """Slot name -> the permissions a member needs to count in it.

    The slot whose members serve the run's data (the one holding ``data.grant``, else the run
    lead's, else the one holding the model: see ``Runtime.data_owner``) needs ``data.grant``,
    so data units only ever come from a member granted it.
    """
    needs = {
        name: frozenset(role.permissions) | (frozenset(role.holds) & set(HOLD_PERMISSIONS))
        for name, role in spec.roles.items()
    }
    for hold in ("data.grant", "run.lead", "model"):
        serving = [name for name, role in spec.roles.items() if hold in role.holds]
        if serving:
            for name in serving:
                needs[name] |= {"data.grant"}
            break
    return needs


def room_roster(
    manifest: Manifest,
    spec: TopologySpec,
    gone: frozenset[str] = frozenset(),
    refused: dict[tuple[str, str], str] | None = None,
) -> Roster:
    """The run's roster: members (not ``gone``) in the slots they hold the needs of.

    ``refused`` collects ``(hotkey, slot) -> why`` for members left out of a slot they claim.
    """
    needs, members = slot_needs(spec), []
    for m in manifest.body.members:
        if m.hotkey in gone:
            continue
        slots = set()
        for slot in m.slots:
            if slot not in needs:
                continue  # a slot of another topology run in the same room
            missing = sorted(needs[slot] - set(m.permissions))
            if missing:
                if refused is not None:
                    refused[(m.hotkey, slot)] = f"lacks {', '.join(missing)}"
                continue
            slots.add(slot)
        members.append(Member(m.hotkey, frozenset(slots), frozenset(m.permissions)))
    return Roster(tuple(members))


def readable(spec: TopologySpec, roster: Roster, reader: str) -> set[str]:
    """Members whose buckets ``reader`` may read in this run (see the module docstring)."""
    me = roster.get(reader)
    if me is None:
        return set()
    out = {hk for hk in roster.hotkeys() if roster.may(hk, "data.grant")}
    observe = "runs.observe" in me.permissions
    for lane in spec.lanes.values():
        if observe and lane.mode == "broadcast" or me.slots & set(lane.readers):
            out |= {hk for slot in lane.writers for hk in roster.in_slot(slot)}
    out.discard(reader)
    return out


class RoomReaders:
    """Readers of the members' buckets that this node may read; None for everyone else."""

    def __init__(self, pool: ReaderPool) -> None:
        self.pool = pool
        self.allowed: set[str] = set()

    def get(self, hotkey: str) -> ObjectStore | None:
        """The reader of ``hotkey``'s bucket, or None when this node may not read it."""
        return self.pool.get(hotkey) if hotkey in self.allowed else None


class RoomMembership:
    """Membership of run ``run`` in a room, refreshed from the room's manifest."""

    def __init__(
        self,
        rooms: RoomStore,
        run: str,
        hotkey: str,
        spec: TopologySpec,
        pool: ReaderPool,
        *,
        owner: str | None = None,
    ) -> None:
        self.rooms, self.run_name, self.hotkey, self.spec = rooms, run, hotkey, spec
        self.owner = owner
        self._readers = RoomReaders(pool)
        self._roster = Roster()
        self.manifest: Manifest | None = None
        self.refused: dict[tuple[str, str], str] = {}  # (hotkey, slot) -> why (last refresh)

    @property
    def roster(self) -> Roster:
        """The snapshot of the last refresh."""
        return self._roster

    @property
    def readers(self) -> RoomReaders:
        """Readers this node may use."""
        return self._readers

    @property
    def run(self) -> RoomRun:
        """The run record this membership follows (SetupError if the room has no such run)."""
        run = self.manifest.body.run(self.run_name) if self.manifest else None
        if run is None:
            raise SetupError(
                f"room {self.rooms.room!r} has no run {self.run_name!r}; "
                "`python -m subnet.room status` lists its runs"
            )
        return run

    def refresh(self) -> Roster:
        """Follow the manifest to its latest verified version; keep the old view on a refusal."""
        try:
            self.manifest = self.rooms.latest(self.manifest, owner=self.owner)
            self.owner = self.manifest.body.owner  # pinned from now on
        except RoomError as error:
            if self.manifest is None:
                raise
            logger.warning(
                "room manifest refused ({}), keeping version {}: {}",
                error.reason,
                self.manifest.version,
                error,
            )
        except StorageError as error:
            if self.manifest is None:
                raise
            logger.warning(
                "room manifest unreadable, keeping version {}: {}", self.manifest.version, error
            )
        refused: dict[tuple[str, str], str] = {}
        roster = room_roster(self.manifest, self.spec, self._left(), refused)
        for (hotkey, slot), why in sorted(refused.items()):
            if self.refused.get((hotkey, slot)) != why:
                logger.warning(
                    "room {}: {} does not count as {} ({}): its work in this run is ignored",
                    self.rooms.room,
                    hotkey,
                    slot,
                    why,
                )
        if self.hotkey in self._roster and self.hotkey not in roster:
            logger.warning(
                "this node ({}) is no longer a member of room {}: it left or was "
                "removed; its work no longer counts",
                self.hotkey,
                self.rooms.room,
            )
        self.refused, self._roster = refused, roster
        self._readers.pool.update(
            {m.hotkey: m.read for m in self.manifest.body.members if m.hotkey in roster}
        )
        self._readers.allowed = readable(self.spec, roster, self.hotkey)
        return roster

    def _left(self) -> frozenset[str]:
        """Members whose valid signed leave the owner has not applied yet."""
        assert self.manifest is not None
        try:
            return frozenset(left_members(self.rooms, self.manifest))
        except StorageError:
            return frozenset()

    def join(self) -> None:
        """Nothing to publish (the redemption did); refuse to run as a non-member."""
        if self.manifest is None:
            self.refresh()
        if self.hotkey not in self._roster:
            raise SetupError(
                f"hotkey {self.hotkey} is not a member of room {self.rooms.room!r}; ask an "
                "admitting member for an invite, then run `python -m subnet.room join`"
            )
