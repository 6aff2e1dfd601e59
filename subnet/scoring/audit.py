"""Audits of training, the pure part: which uploads a window's beacon selects, and whether a
replay of the training matches what the miner sent.

A miner's update is a deterministic function of public inputs (the model version, its assigned
samples, the protocol's inner settings) and of its private training state (AdamW moments and
error feedback). Each upload commits to the digest of that state before and after the window
(``subnet.neuron.audit``). After the upload deadline a beacon nobody knew at commit time (the
chain's block hash at the guard tick) selects about ``audit_fraction`` of the window's uploads;
their senders write the two states, and every validator replays the window's training from the
committed state and compares. An upload whose payload or new state the replay does not give,
within ``audit_tolerance``, is a lie about its own training: the validator scores it 0 and bans
its sender. Every validator draws the same selection and replays the same inputs, so they agree,
and the median score the holder merges by is 0 as well.

What it catches is any update that is not the honest training of the assigned samples from the
committed state: a poisoner's bias, an inflated or sign-flipped update, fewer steps than claimed.
A lie about the state itself must be told in the window whose state it changes, and that
window's audit catches it (the next window's state must continue the committed one).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

import torch

AUDIT_DOMAIN = b"beam-audit-v1\x00"


def audit_draw(beacon: str, run: str, lane: str, window: int, hotkey: str) -> float:
    """A uniform number in ``[0, 1)`` from the beacon and the upload's identity."""
    fields = "\x00".join((beacon, run, lane, str(int(window)), hotkey))
    digest = hashlib.sha256(AUDIT_DOMAIN + fields.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def audited(beacon: str | None, run: str, lane: str, window: int, hotkey: str,
            fraction: float) -> bool:  # fmt: skip
    """Whether ``hotkey``'s upload of ``window`` is audited (never without a beacon)."""
    if beacon is None or fraction <= 0:
        return False
    return audit_draw(beacon, run, lane, window, hotkey) < fraction


def relative_error(
    claimed: Mapping[str, torch.Tensor], replayed: Mapping[str, torch.Tensor]
) -> float:
    """``||claimed - replayed|| / ||replayed||`` over every tensor (``inf`` if the names or shapes
    differ, or any value is not finite; 0 when both are all zeros)."""
    if set(claimed) != set(replayed):
        return math.inf
    num = den = 0.0
    for name, want in replayed.items():
        got = claimed[name]
        if tuple(got.shape) != tuple(want.shape):
            return math.inf
        if not (bool(torch.isfinite(got).all()) and bool(torch.isfinite(want).all())):
            return math.inf
        num += float((got.double() - want.double()).pow(2).sum())
        den += float(want.double().pow(2).sum())
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)


def replay_errors(
    update: Mapping[str, torch.Tensor],
    replayed_update: Mapping[str, torch.Tensor],
    state: Mapping[str, Mapping[str, torch.Tensor]],
    replayed_state: Mapping[str, Mapping[str, torch.Tensor]],
) -> dict[str, float]:
    """The relative error of the update (``update``) and of each state part the sender kept
    (``ef``, ``adamw``): decoded updates, and state parts as tensor dicts."""
    errors = {"update": relative_error(update, replayed_update)}
    for part in sorted(state):
        errors[part] = relative_error(state[part], replayed_state.get(part, {}))
    return errors


def first_failure(
    errors: Mapping[str, float], tolerance: float, state_tolerance: float | None = None
) -> tuple[str, float] | None:
    """``(part, error)`` of the first part above its tolerance (the update first), else None:
    ``tolerance`` for the update, ``state_tolerance`` (default: the same) for the state parts."""
    for part, error in errors.items():
        limit = tolerance if part == "update" or state_tolerance is None else state_tolerance
        if not error <= limit:  # NaN fails too
            return part, error
    return None
