"""Who takes part in a run: a frozen roster of members, their slots and permissions, and the
``Membership`` seam that keeps it (and the readers of members' buckets) up to date.

``ChainMembership`` lives in :mod:`subnet.membership.chain` (it imports the chain layer), so
importing this package stays free of bittensor.
"""

from .base import Membership, Readers, StaticMembership, StaticReaders
from .roster import PERMISSIONS, Member, Roster

__all__ = [
    "PERMISSIONS",
    "Member",
    "Membership",
    "Readers",
    "Roster",
    "StaticMembership",
    "StaticReaders",
]
