"""Who takes part in a run: a frozen roster of members, their slots and permissions."""

from .roster import PERMISSIONS, Member, Roster

__all__ = ["PERMISSIONS", "Member", "Roster"]
