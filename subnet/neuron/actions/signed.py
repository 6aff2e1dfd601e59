"""Small signed objects on a plan lane: data grants, consensus weights, the final marker.

Each is an envelope whose metadata carries JSON and the plan digest; a reader verifies the
signature, run, lane, window and sender, and refuses one made under another plan.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from loguru import logger

from ...storage.base import StorageError
from ...storage.keys import ObjectKind
from ...wire import Expected, Rejected, fetch_envelope, publish_envelope
from ..runtime import Runtime

SMALL_MAX_BYTES = 1024 * 1024  # a grant or a weight vector is a few kilobytes


def put_json(rt: Runtime, kind: ObjectKind, window: int, lane: str | None, field: str,
             value: Any) -> str:  # fmt: skip
    """Sign and write ``value`` (JSON) once as ``field`` of our object; returns its key."""
    key, _ = publish_envelope(
        rt.store, signer=rt.signer, run=rt.cfg.protocol.run, kind=kind, window=window,
        tensors={"none": torch.zeros(1)}, lane=lane,
        metadata={field: json.dumps(value, sort_keys=True), "plan": rt.plan.digest},
    )  # fmt: skip
    return key


def get_json(rt: Runtime, sender: str, kind: ObjectKind, window: int, lane: str | None,
             field: str) -> Any | None:  # fmt: skip
    """``sender``'s verified ``field`` for ``window``, or None when absent or unusable."""
    reader = rt.reader(sender)
    if reader is None:
        return None
    expected = Expected(rt.cfg.protocol.run, window, kind, sender, lane=lane)
    try:
        envelope = fetch_envelope(reader, expected, None, max_bytes=SMALL_MAX_BYTES)
    except StorageError:
        return None  # absent (or unreachable) yet: the caller asks again later
    except Rejected as error:
        logger.info("{} of {} for window {} refused: {}", kind.value, sender[:8], window, error)
        return None
    if envelope.metadata.get("plan") != rt.plan.digest:
        logger.info("{} of {} made under another plan", kind.value, sender[:8])
        return None
    try:
        return json.loads(envelope.metadata.get(field, ""))
    except ValueError:
        return None


def lane_of_kind(rt: Runtime, kind: ObjectKind) -> str | None:
    """The plan's (first) lane of ``kind``, or None."""
    names = sorted(n for n, lane in rt.plan.lanes.items() if lane.kind == kind.value)
    return names[0] if names else None
