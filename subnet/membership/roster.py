"""The roster: a frozen snapshot of who is in a run, in which slots, with which permissions.

A slot is a role name of the run's topology spec (``miner``, ``validator``, ``holder`` in
``@beam/scored-subnet``; ``worker``, ``lead`` ... elsewhere). Roles ask the roster who fills a
slot and what a member may do; they never read chain fields. The roster is built in one place
per membership source (the metagraph and commitments on a chain, the signed manifest in a room)
and is pure data: no I/O, no torch, no chain.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

# Every permission a member can hold (DESIGN.md section 6).
PERMISSIONS = frozenset({"run.lead", "data.grant", "runs.observe", "runs.score", "runs.train"})


@dataclass(frozen=True)
class Member:
    """One participant: its hotkey, the slots it fills, what it may do, its uid on a chain."""

    hotkey: str
    slots: frozenset[str]
    permissions: frozenset[str] = frozenset()
    uid: int | None = None
    stake: float = 0.0

    def __post_init__(self) -> None:
        unknown = set(self.permissions) - PERMISSIONS
        if unknown:
            raise ValueError(f"unknown permissions {sorted(unknown)}; known: {sorted(PERMISSIONS)}")


@dataclass(frozen=True)
class Roster:
    """An immutable set of members, looked up by hotkey or slot."""

    members: tuple[Member, ...] = ()
    _by_hotkey: dict[str, Member] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_hotkey = {m.hotkey: m for m in self.members}
        if len(by_hotkey) != len(self.members):
            raise ValueError("a hotkey appears twice in the roster")
        object.__setattr__(self, "_by_hotkey", by_hotkey)

    def get(self, hotkey: str) -> Member | None:
        """The member with ``hotkey``, or None if it is not in the roster."""
        return self._by_hotkey.get(hotkey)

    def __contains__(self, hotkey: object) -> bool:
        return hotkey in self._by_hotkey

    def hotkeys(self) -> list[str]:
        """Every member's hotkey, sorted."""
        return sorted(self._by_hotkey)

    def in_slot(self, slot: str) -> list[str]:
        """Hotkeys of the members filling ``slot``, sorted."""
        return sorted(m.hotkey for m in self.members if slot in m.slots)

    def may(self, hotkey: str, permission: str) -> bool:
        """Whether ``hotkey`` is a member holding ``permission``."""
        member = self._by_hotkey.get(hotkey)
        return member is not None and permission in member.permissions

    def digest(self) -> str:
        """A stable hash of the roster (sorted canonical JSON, sha256, 16 hex digits)."""
        rows = [
            {
                "hotkey": m.hotkey,
                "slots": sorted(m.slots),
                "permissions": sorted(m.permissions),
                "uid": m.uid,
            }
            for m in sorted(self.members, key=lambda m: m.hotkey)
        ]
        canonical = json.dumps(rows, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]
