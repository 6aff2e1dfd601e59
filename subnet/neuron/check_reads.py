"""What a validator's check reads from a miner's bucket, each read bounded in bytes and time.

A miner decides how fast its bucket answers, so every read here runs for at most ``seconds``
(a thread the caller stops waiting for; the store's own deadline ends it soon after) and reads
at most the bytes the object can honestly take. What cannot be read now is :class:`Owed`: an
outage, or an object not written yet, is never a lie by itself (the checker bans only when it
is still owed past the grace).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ..compression import Compressor
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..verify.answer import BadAnswer, answer_bytes
from ..verify.chunks import ChunkMap
from ..wire import Rejected
from ..wire.schema import GradientMeta
from .runtime import Runtime
from .uploads import Received, collect_uploads

T = TypeVar("T")


class Owed(Exception):
    """What a check needs cannot be read now (missing, a store failure, too slow)."""


def bounded(fn: Callable[[], T], seconds: float, what: str) -> T:
    """``fn()``, or :class:`Owed` when it takes longer than ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - handed to the caller below
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Owed(f"{what} took more than {seconds:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def link_holds(
    rt: Runtime, lane: str, hotkey: str, source: int, digest_in: str, seconds: float
) -> bool:
    """Whether ``hotkey``'s upload of window ``source`` committed to ``state_out == digest_in``
    (an upload that is not there, or refused, commits to nothing)."""
    reader = rt.reader(hotkey)
    if reader is None:
        raise Owed("no bucket known")
    inbox, kind = rt.inbox(lane), ObjectKind.GRADIENT
    try:
        envelope = bounded(
            lambda: inbox.fetch(reader, kind, source, hotkey, max_bytes=rt.max_bytes),
            seconds,
            f"reading its upload of window {source}",
        )
    except (ObjectNotFound, Rejected):
        return False
    except StorageError as error:
        raise Owed(f"its upload of window {source} is unreadable ({error.reason})") from None
    return envelope.message(GradientMeta).state_out == digest_in


def answer(
    rt: Runtime,
    lane: str,
    window: int,
    hotkey: str,
    chunks: ChunkMap,
    ids: list[int],
    fresh: bool,
    seconds: float,
) -> dict[str, torch.Tensor]:
    """The tensors of ``hotkey``'s answer to its check of ``window`` (at most its exact size)."""
    reader = rt.reader(hotkey)
    if reader is None:
        raise Owed("no bucket known")
    inbox, kind = rt.inbox(lane), ObjectKind.CHECK_ANSWER
    limit = answer_bytes(chunks, ids, fresh)
    try:
        envelope = bounded(
            lambda: inbox.fetch(reader, kind, window, hotkey, max_bytes=limit),
            seconds,
            "reading the answer to its check",
        )
    except (ObjectNotFound, StorageError) as error:
        raise Owed(f"the answer to its check is not readable ({str(error)[:80]})") from None
    except Rejected as error:
        raise BadAnswer("check_bad_answer", str(error)) from None
    return envelope.tensors


def late_reveal(
    rt: Runtime,
    lane: str,
    window: int,
    hotkey: str,
    commit: str,
    compressor: Compressor,
    shapes: dict[str, tuple[int, ...]],
    assigned: Callable[[str], list[int]],
    seconds: float,
) -> Received:
    """A named target's upload revealed late (it must give its commit)."""
    got = bounded(
        lambda: collect_uploads(
            rt,
            window,
            [hotkey],
            base_version=None,
            compressor=compressor,
            shapes=shapes,
            assigned=assigned,
            lane=lane,
            commits={hotkey: commit},
        ),
        seconds,
        "reading its late reveal",
    )
    upload = got.accepted.get(hotkey)
    if upload is not None:
        return upload
    if hotkey in got.rejected:
        raise BadAnswer("check_unrevealed", f"its late reveal is refused ({got.rejected[hotkey]})")
    raise Owed("named for a check, and its upload is not revealed yet")
