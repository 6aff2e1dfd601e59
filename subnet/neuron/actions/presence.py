"""Whether every expected sender's object of one window and lane is in its bucket (gates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ...storage.base import ObjectNotFound, ObjectStore
from ...storage.keys import ObjectKind, object_key


def objects_present(
    rt: Any, kind: ObjectKind, lane: str, window: int, hotkeys: Iterable[str],
    read: Callable[[str], ObjectStore | None] | None = None,
) -> bool:  # fmt: skip
    """True when each of ``hotkeys`` has its ``kind`` object for ``window`` on ``lane``.

    ``read`` maps a hotkey to where its objects are read (default ``rt.reader``); a sender with
    no reader counts as absent. One HEAD per sender, stopping at the first one missing.
    """
    read = rt.reader if read is None else read
    for hotkey in hotkeys:
        reader = read(hotkey)
        key = object_key(rt.cfg.protocol.run, kind, window, hotkey, lane=lane)
        try:
            if reader is None or reader.head(key) is None:
                return False
        except ObjectNotFound:
            return False
    return True
