"""One window's score for one upload, and the verdict for every hotkey the validator looked at.

The validator applies a miner's decoded update alone to its held model (with the outer learning
rate) and measures the mean loss on the miner's assigned samples and on random samples, before
and after. ``window_score`` turns those four numbers into a score; ``score_window`` adds the
outcomes that never reach evaluation (missing, late, stale, rejected, copied), each scoring 0.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from subnet.scoring.config import ScoringConfig

Reason = Literal["scored", "missing", "late", "stale", "rejected", "copied"]

# When a hotkey lands in several buckets, the first one here wins: an upload that is missing cannot
# be anything else, an unverifiable one (bad signature) proves nothing about its timing, and a copy
# is only worth naming for an upload that was otherwise acceptable.
_PRECEDENCE: tuple[Reason, ...] = ("missing", "rejected", "late", "stale", "copied")


@dataclass(frozen=True)
class Evaluation:
    """Mean losses of a validator's held model around one miner's update.

    ``*_assigned`` are measured on the samples the miner was assigned this window, ``*_random`` on
    samples drawn by the validator; ``before`` is the held model, ``after`` the held model with
    this miner's update alone applied in full (``theta - delta``, outer learning rate 1).
    """

    hotkey: str
    loss_before_assigned: float
    loss_after_assigned: float
    loss_before_random: float
    loss_after_random: float
    fraction: float = 1.0  # share of the assigned steps trained (a partial upload: k / H)


@dataclass(frozen=True)
class Verdict:
    """What one hotkey earned this window, and why.

    ``detail`` carries the reason code of a rejection (``bad_signature``, ``non_finite_loss``, ...)
    or the hotkey a copy was taken from; it is empty otherwise.
    """

    hotkey: str
    score: float
    reason: Reason
    detail: str = ""


def _relative_gain(before: float, after: float) -> float:
    """Loss drop as a fraction of the loss before.

    Relative, because absolute loss drops shrink as training converges; a relative gain keeps
    scores of early and late windows on one scale inside the moving average.
    """
    return (before - after) / before


def _finite_losses(ev: Evaluation) -> bool:
    """True when all four losses are finite and the 'before' losses are positive (cross-entropy)."""
    losses = (
        ev.loss_before_assigned,
        ev.loss_after_assigned,
        ev.loss_before_random,
        ev.loss_after_random,
    )
    return all(math.isfinite(x) for x in losses) and min(losses[0], losses[2]) > 0.0


def window_score(ev: Evaluation, cfg: ScoringConfig) -> float:
    """Score one upload for one window: >= 0, and 0 for anything that does not help.

    With ``a`` and ``r`` the relative loss drops on assigned and on random samples:

    * ``a <= cfg.min_improvement`` scores 0. An update trained on the assigned data must help
      there; random noise (or a harmful update) raises that loss and so earns nothing.
    * Otherwise the gain ``a`` splits into the part random data shares, ``s = min(a, r)``, and the
      excess ``a - s`` specific to the assigned samples. The excess is proof of work on the
      assignment and earns full credit; the shared part is useful to the model but would also come
      from an update trained on any data (or copied from a public checkpoint), so it earns
      ``cfg.unproven_credit``. An update that helps random data at least as much as assigned data
      thus scores ``unproven_credit * a``.
    * If random loss went up (``r < 0``), that damage to the shared model is subtracted: the score
      is ``a + r``, floored at 0, so overfitting the assigned samples does not pay.

    The rule is continuous in ``a`` and ``r`` above the threshold, so no small change in a
    measurement flips a score from full to nothing. Non-finite losses score 0.

    A partial upload (``k`` of ``H`` steps, ``fraction = k / H``) earns ``fraction`` times that:
    the first steps of a window give the largest loss drops, so without the factor a miner
    training a fraction of the work would earn more than that fraction.
    """
    if not _finite_losses(ev):
        return 0.0
    a = _relative_gain(ev.loss_before_assigned, ev.loss_after_assigned)
    r = _relative_gain(ev.loss_before_random, ev.loss_after_random)
    if a <= cfg.min_improvement:
        return 0.0
    shared = min(a, r)
    if shared < 0.0:
        score = max(0.0, a + shared)
    else:
        score = (a - shared) + cfg.unproven_credit * shared
    return score * min(1.0, max(0.0, ev.fraction))


def _evaluated(evaluations: Iterable[Evaluation], cfg: ScoringConfig) -> dict[str, Verdict]:
    """Verdicts of the evaluated uploads; one evaluation per hotkey."""
    out: dict[str, Verdict] = {}
    for ev in evaluations:
        if ev.hotkey in out:
            raise ValueError(f"two evaluations for hotkey {ev.hotkey!r}")
        if _finite_losses(ev):
            partial = f"partial {ev.fraction:.2f}" if ev.fraction < 1.0 else ""
            out[ev.hotkey] = Verdict(ev.hotkey, window_score(ev, cfg), "scored", partial)
        else:
            out[ev.hotkey] = Verdict(ev.hotkey, 0.0, "rejected", "non_finite_loss")
    return out


def score_window(
    evaluations: Iterable[Evaluation],
    missing: Collection[str],
    late: Collection[str],
    stale: Collection[str],
    rejected: Mapping[str, str],
    copies: Mapping[str, str],
    cfg: ScoringConfig,
) -> dict[str, Verdict]:
    """Every hotkey's verdict for one window; every verdict but ``"scored"`` has score 0.

    ``rejected`` maps hotkey -> reason code; ``copies`` is ``detect_copies``' copier -> original.
    A hotkey found in several inputs takes the first reason of missing, rejected, late, stale,
    copied, scored. Evaluations whose losses are not finite become ``rejected`` with
    ``non_finite_loss``. The result is keyed by hotkey and sorted by it.
    """
    verdicts = _evaluated(evaluations, cfg)
    buckets: dict[Reason, Mapping[str, str]] = {
        "missing": dict.fromkeys(missing, ""),
        "late": dict.fromkeys(late, ""),
        "stale": dict.fromkeys(stale, ""),
        "rejected": rejected,
        "copied": copies,
    }
    for reason in reversed(_PRECEDENCE):  # highest precedence written last, so it wins
        for hotkey, detail in buckets[reason].items():
            verdicts[hotkey] = Verdict(hotkey, 0.0, reason, detail)
    return dict(sorted(verdicts.items()))
