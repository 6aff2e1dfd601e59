"""Fetching a window's uploads: every verified gradient, and why each other one is missing.

Shared by the validator (which scores them) and the model holder (which merges them). Each
upload is fetched from its sender's own bucket, verified as a signed envelope (size, signature,
run, lane, window, sender, base version), checked against the run plan's digest and the
sender's sample receipt, checked as a payload of the configured compressor against the model's shapes,
and decoded. Nothing unverified reaches a model, and one sender's bad object or bad bucket
costs that sender its window, never the reader its process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import torch
from loguru import logger

from ..compression import Compressor, Payload, PayloadError
from ..data import sample_receipt
from ..storage.base import ObjectNotFound, ObjectStore, StorageError
from ..storage.keys import ObjectKind
from ..wire import Envelope, GradientMeta, Reason, Rejected
from .bindings import inner_config
from .commits import reveal_matches
from .lanes import Inbox
from .runtime import Runtime


@dataclass
class Received:
    """A verified upload, kept compressed: readers decode it when they use it, then drop it, so
    memory does not grow with the number of uploads (``subnet.training.streaming``)."""

    hotkey: str
    payload: Payload  # validated against the shapes; decoding cannot fail
    meta: GradientMeta  # the signed metadata, parsed (``subnet.wire.schema``)
    nbytes: int
    tokens: int  # as the sender reports it: informational only, never a weight
    compressor: Compressor = field(repr=False)
    shapes: Mapping[str, tuple[int, ...]] = field(repr=False)
    samples: int = 0  # samples trained: a prefix of the assignment, proven by the receipt
    assigned: int = 0  # samples assigned (H steps' worth)
    steps: int = 0  # inner steps the samples amount to
    sha256: str = ""  # the signed payload digest: what a score report says it scored
    seal: bytes = field(default=b"", repr=False)  # the sender's signed header (``verify_seal``)
    # What the reader's ``measure`` said of the payload as it validated it (``collect_uploads``)
    measured: object = field(default=None, repr=False)

    def decode(self) -> dict[str, torch.Tensor]:
        """The decoded update, decoded afresh on every call: use it and let it go."""
        return self.compressor.decode(self.payload, self.shapes)

    @property
    def fraction(self) -> float:
        """Share of the assigned work this upload proves (1.0 for a full window)."""
        return self.samples / self.assigned if self.assigned else 1.0


@dataclass
class WindowUploads:
    """What a window's senders delivered: decoded uploads, and the reason for everyone else."""

    accepted: dict[str, Received] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    stale: set[str] = field(default_factory=set)
    rejected: dict[str, str] = field(default_factory=dict)  # hotkey -> reason code (``Reason``)


class _Refused(Exception):
    """One sender's upload is unusable; ``reason`` is its code."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.value)
        self.reason = reason


def collect_uploads(
    rt: Runtime,
    window: int,
    senders: Iterable[str],
    *,
    base_version: int | None,
    compressor: Compressor,
    shapes: Mapping[str, tuple[int, ...]],
    assigned: Callable[[str], list[int]],
    lane: str | None = None,
    commits: Mapping[str, str] | None = None,
    measure: Callable[[Payload], object] | None = None,
) -> WindowUploads:
    """Fetch, verify and decode each sender's gradient for ``window`` on ``lane``.

    ``assigned(hotkey)`` gives the sample ids the sender had to train on; its receipt must match.
    ``commits`` (a commit-reveal lane: ``hotkey -> commit digest`` the reader trusts) refuses a
    payload that does not give its sender's commit (``bad_reveal``). ``measure(payload)``, where
    given, validates the payload in place of the codec's ``validate`` (it raises PayloadError
    on an invalid one, with the same reason) and reads what the reader screens every upload by
    in the same parse (``Compressor.measure``: a sparse payload is parsed once, not twice);
    its result is the upload's ``measured``, and an upload it fails on otherwise is refused
    as ``unreadable``.
    """
    out, inbox = WindowUploads(), rt.inbox(lane)
    for hotkey in senders:
        try:
            envelope = _fetch(rt, inbox, window, hotkey, base_version)
            if commits is not None and not reveal_matches(
                rt,
                envelope.header.lane,
                window,
                hotkey,
                envelope.header.payload_sha256,
                commits.get(hotkey, ""),
            ):
                # not the payload it committed to before the deadline
                raise _Refused(Reason.BAD_REVEAL)
            out.accepted[hotkey] = _accept(
                rt, envelope, hotkey, compressor, shapes, assigned, measure
            )
        except ObjectNotFound:
            out.missing.add(hotkey)
        except StorageError as error:
            out.missing.add(hotkey)
            logger.warning("upload of {} unreadable ({}): {}", hotkey[:8], error.reason, error)
        except Rejected as error:
            if error.reason == Reason.WRONG_BASE_VERSION:
                out.stale.add(hotkey)
            else:
                out.rejected[hotkey] = error.reason
            logger.info("upload of {} rejected: {}", hotkey[:8], error)
        except _Refused as error:
            out.rejected[hotkey] = error.reason
            logger.info("upload of {} rejected: {}", hotkey[:8], error.reason)
        except Exception as error:  # a hostile bucket or object must not take the reader down
            out.rejected[hotkey] = Reason.UNREADABLE
            logger.opt(exception=error).warning("upload of {} could not be read", hotkey[:8])
    return out


def _fetch(
    rt: Runtime, inbox: Inbox, window: int, hotkey: str, base_version: int | None
) -> Envelope:
    reader = rt.readers.get(hotkey)
    if reader is None:
        raise _Refused(Reason.NO_BUCKET)
    kind, limit = ObjectKind.GRADIENT, rt.max_bytes
    return inbox.fetch(reader, kind, window, hotkey, max_bytes=limit, base_version=base_version)


def _accept(
    rt: Runtime,
    envelope: Envelope,
    hotkey: str,
    compressor: Compressor,
    shapes: Mapping[str, tuple[int, ...]],
    assigned: Callable[[str], list[int]],
    measure: Callable[[Payload], object] | None = None,
) -> Received:
    meta = envelope.message(GradientMeta)  # parsed where it was accepted; the plan checked
    ids = assigned(hotkey)
    inner = inner_config(rt)  # the plan may set H
    per_step = inner.micro_batch * inner.accumulation
    samples = trained_prefix(meta, ids, per_step, inner.least_steps())
    measured = None
    if measure is None:
        reason = compressor.validate(envelope.tensors, shapes)
        if reason is not None:
            raise _Refused(Reason(reason))
    else:
        try:
            measured = measure(envelope.tensors)
        except PayloadError as error:
            raise _Refused(Reason(error.reason)) from error
    steps = samples // per_step if samples < len(ids) else inner.steps
    return Received(
        hotkey,
        envelope.tensors,
        meta,
        int(envelope.header.payload_bytes),
        meta.tokens,
        compressor,
        shapes,
        samples,
        len(ids),
        steps,
        envelope.header.payload_sha256,
        envelope.seal,
        measured,
    )


def trained_prefix(meta: GradientMeta, ids: list[int], per_step: int, least_steps: int) -> int:
    """How many of the assigned ``ids`` the upload proves it trained: a prefix, or refused.

    A miner short of time trains the first ``k`` steps of its assignment and says so:
    ``samples = k x per_step`` and a receipt of ``ids[:samples]``. Anything else is refused:
    a count that is not whole steps or exceeds the assignment, a receipt of any other ids
    (``bad_receipt``), or fewer than the protocol's ``least_steps`` (``too_few_steps``). Without
    a ``samples`` field the upload claims the whole assignment.
    """
    full = len(ids)
    samples = full if meta.samples is None else meta.samples
    if samples > full or (samples != full and samples % per_step):
        raise _Refused(Reason.BAD_RECEIPT)
    if samples < min(full, least_steps * per_step):
        raise _Refused(Reason.TOO_FEW_STEPS)
    if meta.receipt != sample_receipt(ids[:samples]):
        raise _Refused(Reason.BAD_RECEIPT)  # not trained on (a prefix of) the assigned samples
    return samples


def support(delta: Mapping[str, torch.Tensor]) -> frozenset[int]:
    """Global flat indices of the non-zero coordinates of a sparse update (for copy checks)."""
    indices: list[int] = []
    offset = 0
    for name in sorted(delta):
        flat = delta[name].reshape(-1)
        indices.extend((torch.nonzero(flat).reshape(-1) + offset).tolist())
        offset += flat.numel()
    return frozenset(indices)


def log_uploads(
    metrics,
    window: int,
    got: WindowUploads,
    weights: Mapping[str, float],
    reports: int,
    empty: str | None = None,
) -> None:
    """One ``uploads`` metrics record: every sender's outcome this window, and why it is empty
    (``empty`` overrides the reason the weights give)."""
    verdicts = {hk: "accepted" for hk in got.accepted}
    verdicts |= {hk: "missing" for hk in got.missing} | {hk: "stale" for hk in got.stale}
    verdicts |= {hk: f"rejected:{why}" for hk, why in got.rejected.items()}
    merged = sorted(hk for hk in got.accepted if weights.get(hk, 0.0) > 0)
    if empty is None:
        empty = "" if merged else ("no uploads" if not got.accepted else "no positive score")
    else:
        merged = []
    metrics.log(
        "uploads",
        window=window,
        verdicts=dict(sorted(verdicts.items())),
        merged=merged,
        reports=reports,
        empty=empty,
        samples={hk: u.samples for hk, u in got.accepted.items()},
    )


class Decoded(Mapping):
    """``hotkey -> decoded update`` of a window's uploads, decoded afresh on every access.

    The uploads stay compressed (``Received``); whoever reads one lets it go, so the validator's
    memory does not grow with the number of uploads.
    """

    def __init__(self, accepted: Mapping[str, Received]) -> None:
        self._accepted = accepted

    def __getitem__(self, hotkey: str) -> dict[str, torch.Tensor]:
        return self._accepted[hotkey].decode()

    def add_into(self, hotkey: str, into: dict[str, torch.Tensor], weight: float) -> None:
        """``into += weight * update``, adding only the coordinates a sparse codec sent."""
        got = self._accepted[hotkey]
        got.compressor.add_into(got.payload, got.shapes, into, None, 1.0, weight)

    def __iter__(self) -> Iterator[str]:
        return iter(self._accepted)

    def __len__(self) -> int:
        return len(self._accepted)


def modified_at(reader: ObjectStore, key: str) -> float | None:
    """The store's last-modified time of ``key`` (unix seconds), or None if it is not readable."""
    try:
        return reader.head(key).last_modified.timestamp()
    except StorageError:
        return None
    except Exception as error:  # noqa: BLE001 - a hostile bucket: nothing there, for us
        logger.opt(exception=error).warning("{} unreadable", key)
        return None
