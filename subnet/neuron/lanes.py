"""A member's ends of the plan's lanes: an outbox per lane it writes, an inbox per lane it reads.

An :class:`Outbox` binds what every object this member writes on one lane shares (its own bucket,
its signer, the run, the lane and the plan's digest), so a step says only what it sends: the
kind, the window and the tensors. An :class:`Inbox` binds what every object read from one lane
must show (run, lane, plan), so a reader says only whose object of which window it wants, and
from which bucket. Both come from the runtime (``Runtime.outbox(lane)``, ``Runtime.inbox(lane)``);
``lane=None`` is the kind's default lane (``subnet.storage.keys.DEFAULT_LANES``).

A commit (``gradient-commit``) names no plan: the envelope it commits to does
(``subnet.wire.header``). Both ends know it, so neither a writer nor a reader spells it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..storage.base import ObjectStore
from ..storage.keys import ObjectKind, object_key
from ..wire import Envelope, Expected, Signer, encode_envelope, fetch_envelope

PLANLESS = frozenset({ObjectKind.GRADIENT_COMMIT})  # kinds whose header names no plan


@dataclass(frozen=True)
class Outbox:
    """This member's objects on one lane: signed, in its own bucket, under the plan."""

    store: ObjectStore  # this member's own bucket
    signer: Signer
    run: str
    lane: str | None  # None: each kind's default lane
    plan: str  # the plan's digest, named in every header (but a commit's)

    def key(self, kind: ObjectKind, window: int) -> str:
        """Where our object of ``kind`` for ``window`` on this lane goes."""
        return object_key(self.run, kind, window, self.signer.ss58_address, lane=self.lane)

    def seal(
        self,
        kind: ObjectKind,
        window: int,
        tensors: Mapping[str, torch.Tensor],
        *,
        metadata: Mapping[str, str] | None = None,
        base_version: int | None = None,
    ) -> bytes:
        """Our signed envelope of ``kind`` for ``window`` (nothing written: see :meth:`write`)."""
        return encode_envelope(
            signer=self.signer,
            run=self.run,
            kind=kind,
            window=window,
            tensors=tensors,
            base_version=base_version,
            metadata=metadata,
            lane=self.lane,
            plan=self.plan_of(kind),
        )

    def write(self, kind: ObjectKind, window: int, blob: bytes) -> bool:
        """Write a sealed envelope once at its key; False if the key holds other bytes (a
        retry of the same bytes is True: ``ObjectStore.put_if_absent``)."""
        return self.store.put_if_absent(self.key(kind, window), blob)

    def publish(
        self,
        kind: ObjectKind,
        window: int,
        tensors: Mapping[str, torch.Tensor],
        *,
        metadata: Mapping[str, str] | None = None,
        base_version: int | None = None,
    ) -> tuple[str, bool]:
        """Sign and write our object of ``kind`` for ``window`` once; (key, False if the key
        held other bytes already)."""
        blob = self.seal(kind, window, tensors, metadata=metadata, base_version=base_version)
        return self.key(kind, window), self.write(kind, window, blob)

    def plan_of(self, kind: ObjectKind) -> str | None:
        """The plan digest a header of ``kind`` names (None for a commit)."""
        return None if kind in PLANLESS else self.plan


@dataclass(frozen=True)
class Inbox:
    """Other members' objects on one lane, each verified against the run, the lane and the plan."""

    run: str
    lane: str | None  # None: each kind's default lane
    plan: str  # the digest every header must name (but a commit's)

    def key(self, kind: ObjectKind, window: int, sender: str) -> str:
        """Where ``sender``'s object of ``kind`` for ``window`` on this lane is."""
        return object_key(self.run, kind, window, sender, lane=self.lane)

    def expected(
        self, kind: ObjectKind, window: int, sender: str, base_version: int | None = None
    ) -> Expected:
        """What ``sender``'s object of ``kind`` for ``window`` must show to be accepted
        (``base_version=None``: any base version)."""
        plan = None if kind in PLANLESS else self.plan
        return Expected(
            self.run, window, kind, sender, base_version=base_version, lane=self.lane, plan=plan
        )

    def fetch(
        self,
        reader: ObjectStore,
        kind: ObjectKind,
        window: int,
        sender: str,
        *,
        max_bytes: int,
        base_version: int | None = None,
    ) -> Envelope:
        """``sender``'s verified object of ``kind`` for ``window``, read from ``reader`` (its
        bucket). ``Rejected`` if it is not one; ``ObjectNotFound``/``StorageError`` pass."""
        expected = self.expected(kind, window, sender, base_version)
        return fetch_envelope(reader, expected, None, max_bytes=max_bytes)
