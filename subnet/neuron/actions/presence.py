"""Whether every expected sender's object of one window and lane is in its bucket (gates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loguru import logger

from ...storage.base import ObjectNotFound, ObjectStore, StorageError
from ...storage.keys import ObjectKind, object_key
from ..runtime import Runtime


def objects_present(
    rt: Runtime,
    kind: ObjectKind,
    lane: str,
    window: int,
    hotkeys: Iterable[str],
    read: Callable[[str], ObjectStore | None] | None = None,
) -> bool:
    """True when each of ``hotkeys`` has its ``kind`` object for ``window`` on ``lane``.

    ``read`` maps a hotkey to where its objects are read (default ``rt.reader``); a sender with
    no reader counts as absent. One HEAD per sender, stopping at the first one missing.
    """
    read = rt.reader if read is None else read
    for hotkey in hotkeys:
        key = object_key(rt.cfg.protocol.run, kind, window, hotkey, lane=lane)
        if not present(read(hotkey), key):
            return False
    return True


def present(reader: ObjectStore | None, key: str) -> bool:
    """Whether ``key`` is in ``reader``'s bucket. A bucket that fails the look (any way, an
    unforeseen one too) holds nothing for now: its sender's loss, never the gate's step."""
    try:
        return reader is not None and reader.head(key) is not None
    except ObjectNotFound:
        return False
    except Exception as error:  # noqa: BLE001 - a hostile or broken bucket
        logger.opt(exception=not isinstance(error, StorageError)).info("{} unreadable", key)
        return False
