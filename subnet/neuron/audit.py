"""Audits of training, the neuron side: the state a miner commits to, what it writes when its
upload is audited, and the validator's replay (the rules: ``subnet.scoring.audit``).

A miner's *training state* is what its update depends on besides public inputs: the inner
AdamW moments (when the line keeps them across rounds) and the error feedback. Every gradient
upload's signed metadata names the digest of the state it trained from (``state_in``: ``fresh``,
or the state after the window ``state_from``, an earlier upload of the same sender and lane) and
of the state it left (``state_out``). On a commit-reveal lane those digests are committed before
the deadline with the rest of the envelope.

When the window's beacon selects the upload, the miner writes both states as ``train-state``
objects (one per window: the state *after* that window), before the reveal. A validator then
checks that ``state_in`` continues the ``state_out`` the earlier upload committed to, replays
the window's inner steps on the sender's assigned samples from ``state_in``, compresses with
the same error feedback and compares: the update and the new state must both come out.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..compression import Compressor, ErrorFeedback
from ..scoring.audit import audited, first_failure, replay_errors
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..training import pseudo_gradient
from ..training.config import InnerConfig
from ..training.inner import build_inner_optimizer, train_inner
from ..training.pseudograd import load_parameters
from ..wire import Expected, GradientMeta, Rejected, fetch_envelope, publish_envelope
from .state import load_optimizer_state, optimizer_state, prefixed, unprefixed

FRESH = "fresh"  # the state of a trainer with no moments and no error feedback yet
STATE_IN, STATE_FROM, STATE_OUT = "state_in", "state_from", "state_out"
PARTS = ("ef", "adamw")
_DOMAIN = b"beam-train-state-v1\x00"


def capture(optimizer: torch.optim.Optimizer | None, ef: ErrorFeedback) -> dict[str, torch.Tensor]:
    """A copy of the training state: ``ef/<param>`` and, if given, ``adamw/<index>/<moment>``."""
    tensors = prefixed(ef.state_dict(), "ef")
    if optimizer is not None:
        _, moments = optimizer_state(optimizer)
        tensors |= prefixed({k: v.detach().clone() for k, v in moments.items()}, "adamw")
    return tensors


def state_digest(tensors: dict[str, torch.Tensor]) -> str:
    """Hex sha256 of a training state (names, dtypes, shapes and bytes); ``fresh`` if empty."""
    if not tensors:
        return FRESH
    h = hashlib.sha256(_DOMAIN)
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(f"{name}\x00{t.dtype}\x00{tuple(t.shape)}\x00".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def beacon(rt: Any, window: int) -> str | None:
    """The window's audit beacon: the block hash of its guard tick (``upload_deadline + 1``),
    which nobody knew while commits could still be written; None without a chain clock."""
    source = getattr(rt.clock, "beacon", None)
    if source is None:
        return None
    try:
        return source(rt.windows.start(window) + rt.cfg.protocol.window.upload_deadline + 1)
    except Exception:  # noqa: BLE001 - a chain read that fails: no beacon, nothing audited
        return None


def is_audited(rt: Any, lane: str, window: int, hotkey: str, draw: str | None,
               fresh: bool = False) -> bool:  # fmt: skip
    """Whether ``hotkey``'s upload is audited: ``draw`` (the window's beacon) selects it, or it
    trained from a ``fresh`` state (a new sender's first upload, or one that started over: on
    probation, since nothing it sent before vouches for it). Never without a beacon."""
    p = rt.cfg.protocol
    if draw is None or p.scoring.audit_fraction <= 0:
        return False
    return fresh or audited(draw, p.run, lane, window, hotkey, p.scoring.audit_fraction)


@dataclass
class Held:
    """One upload's training states, kept by the miner until the audit draw is known."""

    window: int
    state_from: int | None  # the window whose state ``before`` is (None: fresh)
    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]

    def metadata(self) -> dict[str, str]:
        """The digests the upload's signed metadata carries."""
        return {STATE_IN: state_digest(self.before), STATE_OUT: state_digest(self.after),
                STATE_FROM: "" if self.state_from is None else str(self.state_from)}  # fmt: skip

    def tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        """For a miner's state file."""
        return prefixed(self.before, f"{prefix}:before") | prefixed(self.after, f"{prefix}:after")

    @classmethod
    def load(cls, meta: dict[str, Any], tensors: dict[str, torch.Tensor], prefix: str) -> Held:
        """Rebuild what :meth:`tensors` and ``meta`` (``window``, ``state_from``) saved."""
        source = meta.get("state_from")
        return cls(int(meta["window"]), None if source is None else int(source),
                   unprefixed(tensors, f"{prefix}:before"), unprefixed(tensors, f"{prefix}:after"))  # fmt: skip


def write_states(rt: Any, lane: str, held: Held) -> None:
    """Write (once) the states an audit of ``held.window`` reads: after ``state_from``, after
    the window. An earlier audit may have written the first already."""
    run = rt.cfg.protocol.run
    states = [(held.window, held.after)]
    if held.state_from is not None:
        states.insert(0, (held.state_from, held.before))
    for window, tensors in states:
        publish_envelope(rt.store, signer=rt.signer, run=run, kind=ObjectKind.TRAIN_STATE,
                         window=window, tensors=tensors, lane=lane)  # fmt: skip


# Reads of an audited sender's bucket: a transient failure is tried again at once, this many
# times in all, then the audit fails (a sender that answers its upload but not its states must
# not escape audits; the store client itself already retries with backoff).
READ_TRIES = 3


def _fetch(reader: Any, expected: Expected, max_bytes: int):
    """``fetch_envelope``, trying a transient storage failure again (not a missing object)."""
    for attempt in range(READ_TRIES):
        try:
            if reader is None:
                raise ObjectNotFound(f"no bucket known for {expected.sender}")
            return fetch_envelope(reader, expected, None, max_bytes=max_bytes)
        except ObjectNotFound:
            raise
        except StorageError:
            if attempt == READ_TRIES - 1:
                raise
    raise AssertionError("unreachable")


class AuditFailed(Exception):
    """An audited upload the replay does not give; ``reason`` is its rejection code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def state_bytes(shapes: dict[str, tuple[int, ...]]) -> int:
    """The most a training state of a model with ``shapes`` may take (three fp32 copies)."""
    return 12 * sum(math.prod(s) for s in shapes.values()) + (1 << 20)


def claims(meta: GradientMeta, window: int) -> tuple[str, int | None, str]:
    """``(state_in, state_from, state_out)`` of an upload's metadata (parsed and checked where
    the envelope was accepted: ``subnet.wire.schema.GradientMeta``)."""
    if meta.state_in is None or meta.state_out is None:
        raise AuditFailed("audit_malformed", "no training-state digests in the upload")
    if meta.state_in == FRESH:
        return meta.state_in, None, meta.state_out
    if meta.state_from is None or not 0 <= meta.state_from < window:
        raise AuditFailed("audit_malformed", f"state_from {meta.state_from} is not earlier")
    return meta.state_in, meta.state_from, meta.state_out


def fetch_state(rt: Any, lane: str, window: int, hotkey: str, digest: str,
                max_bytes: int) -> dict[str, torch.Tensor]:  # fmt: skip
    """``hotkey``'s training state after ``window``, checked against ``digest``."""
    if digest == FRESH:
        return {}
    reader = rt.readers.get(hotkey)
    expected = Expected(rt.cfg.protocol.run, window, ObjectKind.TRAIN_STATE, hotkey, lane=lane)
    try:
        tensors = _fetch(reader, expected, max_bytes).tensors
    except (ObjectNotFound, StorageError, Rejected) as error:
        raise AuditFailed("audit_no_state", f"state after window {window}: {error}") from None
    if state_digest(tensors) != digest:
        raise AuditFailed("audit_state_digest", f"state after window {window} is not the one "
                          "committed to")  # fmt: skip
    return tensors


def committed_out(rt: Any, lane: str, window: int, hotkey: str) -> str:
    """The ``state_out`` ``hotkey``'s upload of ``window`` committed to."""
    reader = rt.readers.get(hotkey)
    expected = Expected(rt.cfg.protocol.run, window, ObjectKind.GRADIENT, hotkey, lane=lane)
    try:
        meta = _fetch(reader, expected, rt.max_bytes).message(GradientMeta)
    except (ObjectNotFound, StorageError, Rejected) as error:
        raise AuditFailed("audit_broken_chain", f"no upload of window {window} to continue "
                          f"({error})") from None  # fmt: skip
    return meta.state_out or ""


@dataclass
class Replayer:
    """What a validator replays with: a scratch model, the inner settings and the codec."""

    model: nn.Module
    inner: InnerConfig
    compressor: Compressor
    ef_decay: float
    tolerance: float
    state_tolerance: float | None = None  # for the state parts (default: ``tolerance``)

    def replay(self, base: dict[str, torch.Tensor], before: dict[str, torch.Tensor], batches,
               steps: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:  # fmt: skip
        """``(decoded update, state after)`` of ``steps`` inner steps from ``base`` and
        ``before`` on ``batches``, on the CPU. ``AuditFailed`` for a state that does not fit
        the model; any other exception (a data read, memory) is the replayer's own failure."""
        device = next(self.model.parameters()).device
        adamw, residual = unprefixed(before, "adamw"), unprefixed(before, "ef")
        load_parameters(self.model, base)
        optimizer = build_inner_optimizer(self.model, self.inner)
        self._check_state(optimizer, base, adamw, residual, set(before))
        if adamw:
            groups, _ = optimizer_state(optimizer)
            load_optimizer_state(optimizer, groups, {k: v.to(device) for k, v in adamw.items()})
        ef = ErrorFeedback(self.ef_decay)
        ef.load_state_dict({k: v.to(device) for k, v in residual.items()})
        batches = list(batches)  # read first: a data failure is not the sender's
        done = train_inner(self.model, batches, self.inner.model_copy(update={"steps": steps}),
                           optimizer)  # fmt: skip
        if done.steps != steps:
            raise AuditFailed("audit_steps", f"{done.steps} of {steps} steps fit the samples")
        delta = pseudo_gradient({k: v.to(device) for k, v in base.items()}, self.model)
        _, decoded = ef.compress(self.compressor, delta)
        after = capture(optimizer, ef)
        return ({k: v.cpu() for k, v in decoded.items()}, {k: v.cpu() for k, v in after.items()})

    @staticmethod
    def _check_state(optimizer, base, adamw, residual, names: set[str]) -> None:
        """Every tensor of a state a sender sent is one the model has, with its shape, fp32."""
        if names - set(prefixed(adamw, "adamw")) - set(prefixed(residual, "ef")):
            raise AuditFailed("audit_bad_state", "unknown tensors in the training state")
        # The optimizer's own numbering (``optimizer_state``): parameters group by group
        params = [tuple(p.shape) for group in optimizer.param_groups for p in group["params"]]
        shapes = {f"{i}/{m}": s for i, s in enumerate(params) for m in ("exp_avg", "exp_avg_sq")}
        shapes |= {f"{i}/step": () for i in range(len(params))}
        moments = {i for i in range(len(params)) if f"{i}/exp_avg" in adamw}
        if adamw and {k.split("/")[0] for k in adamw} != {str(i) for i in moments}:
            raise AuditFailed("audit_bad_state", "moments of parameters that have none")
        want = {k: s for k, s in shapes.items() if int(k.split("/")[0]) in moments}
        for name, (got, expected) in (
            {f"adamw/{k}": (adamw.get(k), s) for k, s in want.items()}
            | {f"ef/{k}": (v, tuple(base[k].shape) if k in base else None)
               for k, v in residual.items()}
        ).items():  # fmt: skip
            if got is None or expected is None or tuple(got.shape) != expected:
                raise AuditFailed("audit_bad_state", f"{name} does not fit the model")
            if got.dtype != torch.float32:
                raise AuditFailed("audit_bad_state", f"{name} is {got.dtype}, not float32")
        if set(adamw) - set(want):
            raise AuditFailed("audit_bad_state", "unknown moments in the training state")

    def check(self, rt: Any, lane: str, window: int, hotkey: str, upload: Any,
              base: dict[str, torch.Tensor], batches, link_known: bool = False) -> float:  # fmt: skip
        """Replay ``upload`` (a ``Received``) and return the largest relative error; raises
        ``AuditFailed`` with the reason when the replay does not give it."""
        digest_in, source, digest_out = claims(upload.meta, window)
        shapes = {k: tuple(v.shape) for k, v in base.items()}
        cap = state_bytes(shapes)
        if (
            source is not None
            and not link_known
            and committed_out(rt, lane, source, hotkey) != digest_in
        ):
            raise AuditFailed("audit_broken_chain", f"state_in is not the state window {source} "
                              "committed to")  # fmt: skip
        before = fetch_state(rt, lane, source if source is not None else window, hotkey,
                             digest_in, cap)  # fmt: skip
        after = fetch_state(rt, lane, window, hotkey, digest_out, cap)
        decoded, replayed = self.replay(base, before, batches, upload.steps)
        claimed_parts = {part: unprefixed(after, part) for part in PARTS}
        replayed_parts = {part: unprefixed(replayed, part) for part in PARTS}
        if set(after) - {k for part, t in claimed_parts.items() for k in prefixed(t, part)}:
            raise AuditFailed("audit_bad_state", "unknown tensors in the state after")
        # A part the sender dropped (no moments kept across rounds, a reset error feedback)
        # starts its next window fresh: harmless, so only the parts it kept are compared.
        kept = {part: t for part, t in claimed_parts.items() if t}
        errors = replay_errors(upload.decode(), decoded, kept, replayed_parts)
        failure = first_failure(errors, self.tolerance, self.state_tolerance)
        if failure is not None:
            what, error = failure
            limit = self.tolerance if what == "update" else self.state_tolerance or self.tolerance
            raise AuditFailed("audit_mismatch", f"the replay's {what} differs by {error:.3g} "
                              f"(tolerance {limit})")  # fmt: skip
        return max(errors.values())
