"""Moving scores across windows and the weights a validator sets on chain from them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Set

from subnet.scoring.config import ScoringConfig


def update_moving(
    moving: Mapping[str, float],
    window_scores: Mapping[str, float],
    registered: Set[str],
    cfg: ScoringConfig,
    kept: Set[str] = frozenset(),
    counts: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """One EMA step per registered hotkey: ``new = (1 - a) * old + a * score``, ``a = ema_alpha``.

    A registered hotkey absent from ``window_scores`` scores 0, so a miner that stops uploading
    decays instead of living on its past; one in ``kept`` (an upload this validator accepted and
    did not evaluate this window: ``scoring.evaluations``) keeps its moving score as it was. A
    hotkey new to ``moving`` starts from 0: weight is earned over windows, not granted on
    registration. ``counts``: how many windows each hotkey was evaluated and payable in, this
    one included; its first ones are averaged rather than decayed (``a = max(ema_alpha, 1 /
    count)``), so a newcomer's standing is its mean score from its first evaluation on, not a
    slow climb from 0 at one evaluation every few windows. Hotkeys no longer registered are
    dropped, so a uid's next owner does not inherit its predecessor's score. Scores for
    unregistered hotkeys are ignored.

    Raises ``ValueError`` on a negative or non-finite window score: one NaN would poison the
    average for good, and ``window_score`` never produces one, so it is a bug upstream.
    """
    for hotkey, score in window_scores.items():
        if not (math.isfinite(score) and score >= 0.0):
            raise ValueError(f"window score of {hotkey!r} must be finite and >= 0, got {score}")
    counts = counts or {}
    out = {}
    for hotkey in sorted(registered):
        old = moving.get(hotkey, 0.0)
        if hotkey in kept and hotkey not in window_scores:
            out[hotkey] = old
            continue
        a = max(cfg.ema_alpha, 1.0 / counts[hotkey]) if counts.get(hotkey, 0) > 0 else cfg.ema_alpha
        out[hotkey] = (1.0 - a) * old + a * window_scores.get(hotkey, 0.0)
    return out


def normalize(values: Mapping[str, float]) -> dict[str, float]:
    """Scale the positive, finite values to sum 1; others become 0. Empty if none is positive."""
    kept = {k: (v if math.isfinite(v) and v > 0.0 else 0.0) for k, v in values.items()}
    total = math.fsum(kept.values())
    if total <= 0.0:
        return {}
    return {k: v / total for k, v in kept.items()}


def weights_for_chain(moving: Mapping[str, float], uids: Mapping[str, int]) -> dict[int, float]:
    """Chain weights, uid -> weight: moving scores of hotkeys with a uid, normalized to sum 1.

    Only positive scores get an entry (zero weights need no room in the extrinsic). Hotkeys
    without a uid are ignored. Returns an empty dict when nobody has a positive score: the
    caller then skips setting weights rather than sending an all-zero vector. Sorted by uid.
    """
    if len(set(uids.values())) != len(uids):
        raise ValueError("two hotkeys share one uid")
    shares = normalize({h: s for h, s in moving.items() if h in uids})
    return {uids[h]: w for h, w in sorted(shares.items(), key=lambda hw: uids[hw[0]]) if w > 0.0}
