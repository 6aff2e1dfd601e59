"""Envelopes meet storage: publish one under its canonical key, fetch and verify one."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from subnet.storage.base import ObjectStore, ObjectTooLarge
from subnet.storage.keys import ObjectKind, object_key
from subnet.wire.envelope import Envelope, encode_envelope, verify_envelope
from subnet.wire.header import Expected, Signer
from subnet.wire.payload import PayloadSpec
from subnet.wire.reasons import Reason, Rejected


def publish_envelope(
    store: ObjectStore,
    *,
    signer: Signer,
    run: str,
    kind: ObjectKind,
    window: int,
    tensors: Mapping[str, torch.Tensor],
    base_version: int | None = None,
    metadata: Mapping[str, str] | None = None,
    lane: str | None = None,
    plan: str | None = None,
) -> tuple[str, bool]:
    """Sign and write once under `object_key(...)`. Returns (key, False if it was already taken)."""
    blob = encode_envelope(
        signer=signer,
        run=run,
        kind=kind,
        window=window,
        tensors=tensors,
        base_version=base_version,
        metadata=metadata,
        lane=lane,
        plan=plan,
    )
    key = object_key(run, kind, window, signer.ss58_address, lane=lane)
    return key, store.put_if_absent(key, blob)


def fetch_envelope(
    store: ObjectStore, expected: Expected, spec: PayloadSpec | None, *, max_bytes: int
) -> Envelope:
    """Read `expected.sender`'s object for `expected`'s window and verify it.

    Raises `Rejected` for a bad object (`too_large` before the body is downloaded), and lets
    `ObjectNotFound` / `StorageError` through: absence and outages are not the sender's fault.
    """
    key = object_key(
        expected.run,
        expected.kind,
        expected.window,
        expected.sender,
        lane=expected.lane,
        version=expected.version,
    )
    try:
        blob = store.get(key, max_bytes)
    except ObjectTooLarge as exc:
        raise Rejected(Reason.TOO_LARGE, exc.detail) from None
    return verify_envelope(blob, expected, spec, max_bytes=max_bytes)
