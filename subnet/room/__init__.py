"""Private rooms: an owner-signed, versioned manifest in object storage, invites, and runs.

A room is a prefix in a bucket (``rooms/<room>/``) holding write-once manifest versions and a
latest pointer (:mod:`.store`), signed by the owner or an admitting member (:mod:`.manifest`);
members join by redeeming single-use signed invites (:mod:`.invite`) and leave with a signed
leave. :class:`subnet.room.membership.RoomMembership` turns the manifest into the roster and
readers a neuron runs with. The CLI is ``python -m subnet.room`` (see docs/rooms.md).
"""

from .errors import REASONS, RoomError

__all__ = ["REASONS", "RoomError"]
