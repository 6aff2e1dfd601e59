"""When each upload of a window first appeared: the validator's upload order off commit-reveal.

On a lane without commit-reveal the validator looks at every miner's bucket on each tick up to
the upload deadline and notes the tick (and the store's last-modified time) an upload was first
there. An upload it did not see by the deadline tick arrived after it, however early the
validator gets round to fetching it (``after_deadline``). A bucket that fails once is not polled
again that window, and nothing is held against its uploads: there is no observation to go by.
It is saved with the role, so a restart between the deadline and scoring keeps the order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loguru import logger

from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from .runtime import Runtime


class Arrivals:
    """First sightings of a lane's uploads, per window (the module doc)."""

    def __init__(self, rt: Runtime, lane: str) -> None:
        """``lane``: the gradient lane whose uploads are watched."""
        self.rt = rt
        self.lane = lane
        # (window, hotkey) -> (tick first seen, the store's last-modified time): upload order
        self.first_seen: dict[tuple[int, str], tuple[int, float]] = {}
        self.unreachable: set[tuple[int, str]] = set()
        # Windows whose deadline tick this validator itself looked at: an upload it did not see
        # then arrived after the deadline, however early the validator gets round to fetching it.
        self.deadline_looked: set[int] = set()

    def look(self, tick: int, window: int, offset: int, miners: Iterable[str]) -> None:
        """Note the uploads of ``window`` there now that were not seen before (``offset``: the
        tick's place in the window, at most the upload deadline)."""
        inbox = self.rt.inbox(self.lane)
        for hotkey in miners:
            if (window, hotkey) in self.first_seen or (window, hotkey) in self.unreachable:
                continue
            reader = self.rt.readers.get(hotkey)
            key = inbox.key(ObjectKind.GRADIENT, window, hotkey)
            try:
                info = reader.head(key) if reader is not None else None
            except ObjectNotFound:
                continue  # not uploaded yet: look again next block
            except Exception as error:  # noqa: BLE001 - a broken or hostile bucket: its own loss
                # A bucket that fails (or stalls) once is not polled again this window, so one
                # slow endpoint cannot hold up the loop block after block.
                if not isinstance(error, StorageError):
                    logger.opt(exception=error).warning("bucket of {} broke", hotkey[:8])
                self.unreachable.add((window, hotkey))
                continue
            if info is not None:
                self.first_seen[(window, hotkey)] = (tick, info.last_modified.timestamp())
        if offset == self.rt.cfg.protocol.window.upload_deadline:
            self.deadline_looked.add(window)  # every upload there now was seen in time

    def after_deadline(self, window: int, accepted: Iterable[str]) -> set[str]:
        """Accepted uploads that were not there when this validator looked at the deadline tick.

        Only when it did look at that tick (not after a restart or a skipped tick), and never
        for a bucket it could not poll: then there is no observation to go by.
        """
        if window not in self.deadline_looked:
            return set()
        return {
            hk
            for hk in accepted
            if (window, hk) not in self.first_seen and (window, hk) not in self.unreachable
        }

    def forget(self, window: int) -> None:
        """Drop ``window`` and everything before it (scored: its order decides nothing more)."""
        self.first_seen = {k: b for k, b in self.first_seen.items() if k[0] > window}
        self.unreachable = {k for k in self.unreachable if k[0] > window}
        self.deadline_looked = {w for w in self.deadline_looked if w > window}

    def state_dict(self) -> dict[str, Any]:
        """The sightings of the windows not scored yet (keys of the validator's state file)."""
        return {
            "first_seen": [[w, hk, *at] for (w, hk), at in sorted(self.first_seen.items())],
            "unreachable": sorted(self.unreachable),
            "deadline_looked": sorted(self.deadline_looked),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved (missing keys: nothing seen)."""
        seen = state.get("first_seen", [])
        self.first_seen = {(int(w), str(hk)): (int(t), float(at)) for w, hk, t, at in seen}
        self.unreachable = {(int(w), str(hk)) for w, hk in state.get("unreachable", [])}
        self.deadline_looked = {int(w) for w in state.get("deadline_looked", [])}
