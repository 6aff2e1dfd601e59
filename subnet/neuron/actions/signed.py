"""Small signed objects on a plan lane: data grants, consensus weights, the final marker.

Each is an envelope whose metadata is its kind's message (``subnet.wire.schema``: ``GrantMeta``,
``WeightsMeta``, ``FinalMeta``) and whose signed header names the plan; a reader verifies the
signature, run, lane, window, sender and plan, and gets the message parsed, or nothing.
"""

from __future__ import annotations

import torch
from loguru import logger

from ...storage.base import StorageError
from ...storage.keys import ObjectKind
from ...wire import Message, Rejected
from ...wire.schema import M
from ..runtime import Runtime

SMALL_MAX_BYTES = 1024 * 1024  # a grant or a weight vector is a few kilobytes


def put_message(
    rt: Runtime, kind: ObjectKind, window: int, lane: str | None, message: Message
) -> str:
    """Sign and write ``message`` once as our object of ``kind``; returns its key."""
    key, _ = rt.outbox(lane).publish(
        kind, window, {"none": torch.zeros(1)}, metadata=message.wire()
    )
    return key


def get_message(
    rt: Runtime, sender: str, kind: ObjectKind, window: int, lane: str | None, schema: type[M]
) -> M | None:
    """``sender``'s verified message for ``window``, or None when absent or refused (a refusal
    of any kind, an unforeseen one too, costs that sender its message, never the reader)."""
    reader = rt.reader(sender)
    if reader is None:
        return None
    try:
        envelope = rt.inbox(lane).fetch(reader, kind, window, sender, max_bytes=SMALL_MAX_BYTES)
        return envelope.message(schema)
    except StorageError:
        return None  # absent (or unreachable) yet: the caller asks again later
    except Rejected as error:
        logger.info("{} of {} for window {} refused: {}", kind.value, sender[:8], window, error)
    except Exception as error:  # noqa: BLE001 - a hostile bucket or object: that sender's loss
        logger.opt(exception=error).warning(
            "{} of {} for window {} unreadable", kind.value, sender[:8], window
        )
    return None


def lane_of_kind(rt: Runtime, kind: ObjectKind) -> str | None:
    """The plan's (first) lane of ``kind``, or None."""
    names = sorted(n for n, lane in rt.plan.lanes.items() if lane.kind == kind.value)
    return names[0] if names else None
