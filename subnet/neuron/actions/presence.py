"""Whether every expected sender's object of one window and lane is in its bucket (gates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loguru import logger

from ...storage.base import ObjectNotFound, ObjectStore, StorageError
from ...storage.keys import ObjectKind
from ..lanes import Inbox


def objects_present(
    inbox: Inbox,
    kind: ObjectKind,
    window: int,
    hotkeys: Iterable[str],
    read: Callable[[str], ObjectStore | None],
) -> bool:
    """True when each of ``hotkeys`` has its ``kind`` object for ``window`` on ``inbox``'s lane.

    ``read`` maps a hotkey to where its objects are read (``Runtime.reader``, or the readers
    alone); a sender with no reader counts as absent. One HEAD per sender, stopping at the
    first one missing.
    """
    for hotkey in hotkeys:
        if not present(read(hotkey), inbox.key(kind, window, hotkey)):
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
