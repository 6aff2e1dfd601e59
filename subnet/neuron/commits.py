"""Commit-reveal on a lane (``commit_reveal = true``): the miner's seal and reveal, and the
validator's snapshot of the commits it may trust.

A window on such a lane, by offset:

* ``[0, upload_deadline)``: the miner trains, signs its gradient envelope and writes only a
  commit to it (``seal``: ``subnet.wire.commit``), keeping the envelope.
* ``upload_deadline``: the validators' last poll of the commits. A validator polls every tick up
  to here and keeps the first commit it reads from each miner, but only from a poll that ended
  before the reveal opened (it reads the clock after each poll): the bucket is the miner's own
  and nothing in it says when an object was written, so a commit first read in a poll that ran
  into the reveal could have been rewritten after seeing someone's payload.
* ``upload_deadline + 1``: a guard tick (a validator's chain node may lag a miner's by a block).
* ``upload_deadline + 2`` on (phase ``reveal``): the miner writes the envelope it committed to.
* The validators score once every committed upload is revealed (gate ``revealed``) or at
  ``window.reveal_by``; a reveal whose payload does not give the commit is ``bad_reveal``.

Copying therefore cannot pay, whoever reaches a bucket first: when the first payload becomes
readable every commit a validator trusts is fixed, and a copied payload does not match its
copier's commit (``docs/reliability.md``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from loguru import logger

from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..wire import CommitMeta, Rejected, envelope_header
from ..wire.commit import MAX_COMMIT_BYTES, commit_digest
from .runtime import Runtime


@dataclass
class Sealed:
    """An upload committed to and not yet revealed: the signed envelope, written as is later."""

    window: int
    lane: str
    key: str  # where the reveal goes
    blob: bytes = field(repr=False)
    record: dict[str, Any] = field(default_factory=dict)  # the window's train metrics
    pending: bool = False  # its reveal was tried and failed: tried again at the next tick

    def meta(self) -> dict[str, Any]:
        """What a state file keeps of it besides the blob."""
        return {
            "window": self.window,
            "lane": self.lane,
            "key": self.key,
            "record": self.record,
            "pending": self.pending,
        }

    @classmethod
    def load(cls, meta: dict[str, Any], blob: torch.Tensor) -> Sealed:
        """Rebuild from :meth:`meta` and the blob as a uint8 tensor."""
        return cls(
            int(meta["window"]),
            str(meta["lane"]),
            str(meta["key"]),
            blob.numpy().tobytes(),
            dict(meta.get("record", {})),
            bool(meta.get("pending", False)),
        )


def seal(
    rt: Runtime,
    window: int,
    lane: str,
    tensors: dict[str, torch.Tensor],
    base_version: int | None,
    metadata: dict[str, str],
) -> Sealed:
    """The signed gradient envelope to commit to now and reveal later (nothing written yet: the
    caller keeps it safe first, then writes the commit)."""
    outbox, kind = rt.outbox(lane), ObjectKind.GRADIENT
    blob = outbox.seal(kind, window, tensors, metadata=metadata, base_version=base_version)
    return Sealed(window, lane, outbox.key(kind, window), blob)


def write_commit(rt: Runtime, sealed: Sealed) -> bool:
    """Write (once) the signed commit to ``sealed``'s envelope; False if one was there already
    (a restart: the digest, a function of the envelope, is the same)."""
    run, window, lane = rt.cfg.protocol.run, sealed.window, sealed.lane
    digest = commit_digest(
        run, lane, window, rt.hotkey, envelope_header(sealed.blob).payload_sha256
    )
    commit = CommitMeta(commit=digest).wire()
    _, written = rt.outbox(lane).publish(ObjectKind.GRADIENT_COMMIT, window, {}, metadata=commit)
    logger.info("committed to window {} ({})", window, "new" if written else "already there")
    return written


def write_reveal(rt: Runtime, sealed: Sealed) -> bool:
    """Write the committed envelope once; False if the key was taken already."""
    return rt.store.put_if_absent(sealed.key, sealed.blob)


def fetch_commit(rt: Runtime, lane: str, window: int, hotkey: str) -> str:
    """``hotkey``'s verified commit digest for ``window`` on ``lane``.

    Raises ``Rejected`` for a malformed commit (``malformed_payload`` when it carries no
    digest: ``CommitMeta``), and lets ``ObjectNotFound`` / ``StorageError`` through (a sender without a bucket
    is ``ObjectNotFound``)."""
    reader = rt.readers.get(hotkey)
    if reader is None:
        raise ObjectNotFound(f"no bucket known for {hotkey}")
    kind = ObjectKind.GRADIENT_COMMIT
    envelope = rt.inbox(lane).fetch(reader, kind, window, hotkey, max_bytes=MAX_COMMIT_BYTES)
    return envelope.message(CommitMeta).commit  # a commit without a digest: malformed_payload


def reveal_matches(
    rt: Runtime, lane: str, window: int, hotkey: str, payload_sha256: str, commit: str
) -> bool:
    """Whether a revealed envelope's signed payload digest gives the commit read for it."""
    return commit_digest(rt.cfg.protocol.run, lane, window, hotkey, payload_sha256) == commit


# Reads of one miner's commit that may fail (an error, or no answer within a poll) before a
# validator stops polling that bucket for the window; the miner is then missing, as one that
# never committed.
MAX_FAILURES = 3
# One poll reads the commits in parallel, a thread each, and waits this long at most: a bucket
# that stalls costs its own sender a failed read, never the other miners their place in the
# snapshot (a stalled read runs out on its own, within the reader's deadline).
POLL_BUDGET_S = 2.0


@dataclass
class WindowCommits:
    """The commits one validator read for one window before the reveal opened."""

    digests: dict[str, str] = field(default_factory=dict)  # hotkey -> commit digest
    refused: dict[str, str] = field(default_factory=dict)  # hotkey -> why its commit was refused
    trusted: bool = False  # some poll ended before the reveal opened
    complete: bool = False  # a poll on the deadline tick itself did


class CommitSnapshot:
    """What a validator may trust of each window's commits (memory only: a validator restarted
    after a window's deadline has no snapshot of it and does not score it)."""

    def __init__(self, budget_s: float = POLL_BUDGET_S) -> None:
        self.windows: dict[int, WindowCommits] = {}
        self.failures: dict[tuple[int, str], int] = {}  # failed reads of a bucket, per window
        self.budget_s = budget_s

    def poll(self, rt: Runtime, lane: str, window: int, offset: int, senders: list[str]) -> None:
        """Read the commits of ``senders`` not read yet; keep them only if the poll ended before
        the reveal opened (tick ``upload_deadline + 1`` of the window)."""
        cfg = rt.windows.cfg
        if offset > cfg.upload_deadline:
            return
        entry = self.windows.setdefault(window, WindowCommits())
        todo = [
            hk
            for hk in senders
            if hk not in entry.digests and self.failures.get((window, hk), 0) < MAX_FAILURES
        ]
        read: dict[str, str] = {}
        refused: dict[str, str] = {}
        for hotkey, outcome in self._read(rt, lane, window, todo).items():
            if isinstance(outcome, str):
                read[hotkey] = outcome
            elif isinstance(outcome, Rejected):  # looked at again next tick: it may be repaired
                refused[hotkey] = f"commit_{outcome.reason.value}"
            elif not isinstance(outcome, ObjectNotFound):  # failed or unanswered: retried, a few
                self.failures[(window, hotkey)] = self.failures.get((window, hotkey), 0) + 1
                if not isinstance(outcome, (StorageError, TimeoutError)):
                    logger.opt(exception=outcome).warning(
                        "reading the commit of {} failed", hotkey[:8]
                    )
        if rt.clock.now() > rt.windows.start(window) + cfg.upload_deadline:
            if read:
                logger.warning(
                    "window {}: {} commit(s) read in a poll that ran into the reveal; not "
                    "trusted (this validator is running late)",
                    window,
                    len(read),
                )
            return
        entry.digests.update(read)
        entry.refused = {
            hk: why for hk, why in {**entry.refused, **refused}.items() if hk not in entry.digests
        }
        entry.trusted = True
        entry.complete = entry.complete or offset == cfg.upload_deadline

    def _read(self, rt: Runtime, lane: str, window: int, hotkeys: list[str]) -> dict[str, object]:
        """``hotkey -> digest``, or the exception its read raised, for the reads that finished
        within the budget (the others are left to finish on their own and count as failed)."""
        results: dict[str, object] = {}
        finished = threading.Condition()

        def read(hotkey: str) -> None:
            try:
                outcome: object = fetch_commit(rt, lane, window, hotkey)
            except Exception as error:  # noqa: BLE001 - handed to the poll, which sorts it
                outcome = error
            with finished:
                results[hotkey] = outcome
                finished.notify()

        for hotkey in hotkeys:  # daemon threads: a stalled read never holds up an exit
            threading.Thread(target=read, args=(hotkey,), daemon=True).start()
        with finished:
            finished.wait_for(lambda: len(results) == len(hotkeys), timeout=self.budget_s)
            answered = dict(results)
        unanswered = TimeoutError("no answer within the poll")
        return {hk: answered.get(hk, unanswered) for hk in hotkeys}

    def failed(self, window: int) -> set[str]:
        """The miners of ``window`` whose commit could not be read at least once."""
        return {hk for (w, hk) in self.failures if w == window}

    def of(self, window: int) -> WindowCommits | None:
        """The snapshot of ``window``, or None if no poll of it can be trusted."""
        entry = self.windows.get(window)
        return entry if entry is not None and entry.trusted else None

    def forget(self, window: int) -> None:
        """Drop ``window`` and everything before it."""
        self.windows = {w: c for w, c in self.windows.items() if w > window}
        self.failures = {k: n for k, n in self.failures.items() if k[0] > window}
