"""The ``Membership`` seam: who is in the run now, and how to read their buckets.

A membership source keeps a frozen :class:`~subnet.membership.roster.Roster` snapshot and the
readers of members' buckets, refreshes both on request, and lets this node ``join`` (publish how
peers read its bucket). Roles ask ``membership.roster`` who fills a slot and
``membership.readers`` for a member's store; they never read chain fields. Subnet mode injects
:class:`~subnet.membership.chain.ChainMembership`; tests and fixed rooms a
:class:`StaticMembership`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..storage.base import ObjectStore
from .roster import Roster


class Readers(Protocol):
    """Hotkey -> a read-only store of that member's bucket (``ReaderPool`` fits)."""

    def get(self, hotkey: str) -> ObjectStore | None:
        """The member's reader, or None when it published no readable bucket."""
        ...


class Membership(Protocol):
    """A roster snapshot plus readers, refreshed from wherever membership lives."""

    @property
    def roster(self) -> Roster:
        """The latest snapshot (frozen: a refresh replaces it)."""
        ...

    @property
    def readers(self) -> Readers:
        """Readers of the members' buckets."""
        ...

    def refresh(self) -> Roster:
        """Re-read membership; returns (and keeps) the new snapshot."""
        ...

    def join(self) -> None:
        """Publish how peers read this node's bucket (idempotent)."""
        ...


class StaticReaders:
    """Readers from a plain dict (tests, and rooms whose buckets are known up front)."""

    def __init__(self, stores: Mapping[str, ObjectStore] | None = None) -> None:
        self.stores: dict[str, ObjectStore] = dict(stores or {})

    def get(self, hotkey: str) -> ObjectStore | None:
        """The store registered for ``hotkey``, or None."""
        return self.stores.get(hotkey)


class StaticMembership:
    """A fixed roster and fixed readers; ``refresh`` and ``join`` change nothing."""

    def __init__(self, roster: Roster, readers: Readers | None = None) -> None:
        self._roster = roster
        self._readers = readers if readers is not None else StaticReaders()
        self.refreshes = 0  # how often a role asked (tests check the loop refreshes per window)

    @property
    def roster(self) -> Roster:
        """The roster given at construction (or set since)."""
        return self._roster

    @roster.setter
    def roster(self, roster: Roster) -> None:
        self._roster = roster

    @property
    def readers(self) -> Readers:
        """The readers given at construction."""
        return self._readers

    def refresh(self) -> Roster:
        """The same roster (membership is fixed)."""
        self.refreshes += 1
        return self._roster

    def join(self) -> None:
        """Nothing to publish: peers were given our store directly."""
