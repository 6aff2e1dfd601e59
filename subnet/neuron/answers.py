"""Checks, the miner's side: the error feedback it commits to, and its answers to checks.

Every gradient upload's signed metadata names the Merkle root of the error feedback it trained
from (``state_in``: a root, or ``fresh`` for an all-zero one), the window of the upload that
left it (``state_from``) and the root of the error feedback it leaves (``state_out``); on a
commit-reveal lane they are committed before the deadline with the rest of the envelope. The
inner optimizer starts fresh every window, so nothing else about its training is private.

After the deadline each validator writes a notice naming the uploads it checks
(``subnet.wire.schema.CheckNotice``). A named miner writes one answer for that window: the chunks the
window's beacon draws, before and after, each with its Merkle proof (``subnet.verify.answer``).
It keeps its states until two windows have passed, so a late notice, a failed write or a
restart still gets its answer out; a validator counts a missing answer as owed, not as a lie.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from loguru import logger

from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..verify.answer import encode_answer
from ..verify.chunks import FRESH, ChunkMap
from ..verify.draw import chunk_sample
from ..wire import Rejected
from ..wire.schema import CheckNotice, GradientMeta
from .runtime import Runtime
from .state import prefixed, unprefixed

STATE_IN, STATE_FROM, STATE_OUT = "state_in", "state_from", "state_out"
NOTICE_BYTES = 16 << 10  # the most a validator's notice may take
KEEP = 2  # windows a miner keeps an upload's states for answers


def chunk_map(rt: Runtime, shapes: dict[str, tuple[int, ...]]) -> ChunkMap:
    """How this network's codec cuts a model of ``shapes`` into chunks."""
    return ChunkMap.of(shapes, rt.cfg.protocol.compression.chunk)


def beacon(rt: Runtime, window: int) -> str | None:
    """The window's beacon: the drand pulse after its guard tick (``upload_deadline + 1``),
    which nobody knew while commits could still be written (``BlockClock.beacon``); None
    without a chain clock, before the pulse is stored, or when the chain does not answer."""
    if rt.beacon is None:
        return None
    try:
        return rt.beacon(rt.windows.start(window) + rt.cfg.protocol.window.upload_deadline + 1)
    except Exception:  # noqa: BLE001 - a chain read that fails: no beacon, nothing checked
        return None


@dataclass
class Held:
    """One upload's error feedback before and after its window, kept for answers."""

    window: int
    state_from: int | None  # the window whose state ``before`` is (None: fresh)
    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    roots: tuple[str, str] = ("", "")  # the committed roots of before and after
    answered: bool = False
    seen: set[str] = field(default_factory=set)  # validators whose notice was read

    @classmethod
    def of(cls, chunks: ChunkMap, window: int, state_from: int | None, before, after) -> Held:
        """Held states with their roots computed (``FRESH`` for an empty state)."""
        return cls(window, state_from, before, after, (chunks.commit(before), chunks.commit(after)))

    def metadata(self) -> dict[str, Any]:
        """The commitments the upload's signed metadata carries (``GradientMeta`` fields)."""
        return {STATE_IN: self.roots[0], STATE_OUT: self.roots[1], STATE_FROM: self.state_from}

    def wire(self) -> dict[str, str]:
        """The same commitments as signed strings (the schema's own writing of them)."""
        return GradientMeta(**self.metadata()).wire()

    def record(self) -> dict[str, Any]:
        """What a state file keeps besides the tensors."""
        return {
            "window": self.window,
            "state_from": self.state_from,
            "roots": list(self.roots),
            "answered": self.answered,
        }

    def tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        """For a miner's state file."""
        return prefixed(self.before, f"{prefix}:before") | prefixed(self.after, f"{prefix}:after")

    @classmethod
    def load(cls, meta: dict[str, Any], tensors: dict[str, torch.Tensor], prefix: str) -> Held:
        """Rebuild what :meth:`tensors` and :meth:`record` saved."""
        source = meta.get("state_from")
        roots = tuple(meta.get("roots", ("", "")))
        return cls(
            int(meta["window"]),
            None if source is None else int(source),
            unprefixed(tensors, f"{prefix}:before"),
            unprefixed(tensors, f"{prefix}:after"),
            (str(roots[0]), str(roots[1])),
            bool(meta.get("answered", False)),
        )


def notice_lane(rt: Runtime) -> str | None:
    """The lane validators write their notices on: the plan's score lane (None: no scorers)."""
    for lane in rt.plan.lanes.values():
        if lane.kind == ObjectKind.SCORES.value:
            return lane.name
    return None


class Malformed(ValueError):
    """An upload whose commitments are missing (their form is checked where the envelope is
    read: ``subnet.wire.schema.GradientMeta``)."""


def commitments(meta: GradientMeta, window: int) -> tuple[str, int | None, str]:
    """``(state_in, state_from, state_out)`` of an upload (:class:`Malformed` if it has none)."""
    if meta.state_in is None or meta.state_out is None:
        raise Malformed("no error-feedback roots in the upload")
    if meta.state_out == FRESH:
        raise Malformed("state_out must be a root")
    if meta.state_from is not None and not meta.state_from < window:
        raise Malformed(f"state_from {meta.state_from} is not an earlier window")
    return meta.state_in, meta.state_from, meta.state_out


def read_notice(rt: Runtime, window: int, validator: str) -> CheckNotice | None:
    """``validator``'s notice for ``window``; None when it is not there (yet) or unreadable
    now. Raises ``Rejected`` for one that is there and refused: by its schema, or for a
    verdict on a window its validator could not have checked by then (``verdict_windows``)."""
    lane = notice_lane(rt)
    reader = rt.reader(validator)
    if lane is None or reader is None:
        return None
    inbox = rt.inbox(lane)
    try:
        envelope = inbox.fetch(reader, ObjectKind.CHECKS, window, validator, max_bytes=NOTICE_BYTES)
    except (ObjectNotFound, StorageError):
        return None
    notice = envelope.message(CheckNotice)
    notice.refuse_outside(window, rt.cfg.protocol.scoring.check_grace)
    return notice


def named_by(
    rt: Runtime, window: int, held: Held, coverage: dict[str, tuple[str, ...]] | None = None
) -> list[str]:
    """Validators whose notice for ``window`` names this miner (reading only notices not read
    yet; a notice that is not there yet is looked for again at the next call); ``coverage``
    gets the replay classes each notice read says its validator covers."""
    lane = notice_lane(rt)
    if lane is None:
        return []
    named = []
    for validator in rt.writers(lane):
        if validator in held.seen:
            continue
        try:
            notice = read_notice(rt, window, validator)
        except Rejected as error:
            held.seen.add(validator)
            logger.info(
                "window {}: the notice of validator {} is refused ({})",
                window,
                validator[:8],
                error,
            )
            continue
        if notice is None:
            continue  # not written yet, or unreadable now: looked for again
        held.seen.add(validator)
        if coverage is not None and notice.covers:
            coverage[validator] = notice.covers
        if rt.hotkey in notice.targets:
            named.append(validator)
    return named


def write_answer(
    rt: Runtime, lane: str, held: Held, draw: str, shapes: dict[str, tuple[int, ...]]
) -> int:
    """Write (once) the answer to a check of ``held.window``: the drawn chunks before and after,
    with their proofs; the bytes written (0 if it was there already). Lets a ``StorageError``
    through (tried again later)."""
    p = rt.cfg.protocol
    chunks = chunk_map(rt, shapes)
    ids = chunk_sample(draw, p.run, lane, held.window, rt.hotkey, chunks, p.scoring.check_chunks)
    before = held.before if held.roots[0] != FRESH else {}
    outbox, kind = rt.outbox(lane), ObjectKind.CHECK_ANSWER
    blob = outbox.seal(kind, held.window, encode_answer(chunks, ids, before, held.after))
    return len(blob) if outbox.write(kind, held.window, blob) else 0
