"""One window's score for one upload, and the verdict for every hotkey the validator looked at.

The validator applies a miner's decoded update alone to its held model (with outer learning rate
1) and measures the loss on a random subset of the miner's assigned samples and on random
samples, before and after, sample by sample (``subnet.scoring.assess``). ``window_score`` turns
that into a score: only the **proven** excess gain on the miner's own samples is paid
(``subnet.scoring.evidence``), scaled down for an update that helps unseen data less than the
window's typical upload. ``score_window`` adds the outcomes that never reach evaluation
(missing, late, stale, rejected, copied), each scoring 0.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from subnet.scoring.config import ScoringConfig
from subnet.scoring.evidence import Specificity, usefulness
from subnet.scoring.record import gain_ratio, record_credit

# ``unverified``: scored 0 by a validator under probation (``scoring.pay_unverified``: no check
# of the sender has passed yet); set after scoring, by ``subnet.neuron.validator``.
# ``standing``: an accepted upload this validator did not evaluate this window (it evaluates a
# sample, ``scoring.evaluations``): reported at its sender's moving score; ``held``: a
# fingerprint matched it and the window's evaluations were spent: paid nothing, merged by nobody.
Reason = Literal[
    "scored", "unverified", "standing", "held", "missing", "late", "stale", "rejected", "copied"
]

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
    ``specific`` is the excess gain on the own samples over the reference update
    (``evidence.specificity``); without it nothing is proven and the upload scores 0.
    """

    hotkey: str
    loss_before_assigned: float
    loss_after_assigned: float
    loss_before_random: float
    loss_after_random: float
    specific: Specificity | None = None
    fraction: float = 1.0  # share of the assigned steps trained (a partial upload: k / H)
    # Mean loss before / after on a draw of the reported held-out set (``draws``); None when
    # the validator measured none.
    loss_before_heldout: float | None = None
    loss_after_heldout: float | None = None
    # The factor the upload was scaled by before it was measured (``assess.AsMerged``: clipped
    # to the window's median norm, as the holder merges it); 1 for an upload at or below it.
    scale: float = 1.0

    def measures(self) -> dict[str, float | None]:
        """What the score was computed from, for the validator's metrics (None if not finite).

        ``assigned``/``random``/``heldout``: relative loss drops; ``specific``/``se``: the own-data
        excess and its standard error; ``fraction``: the share of the steps trained; ``scale``:
        the clip to the median norm it was measured at.
        """
        a, r = _gains(self) if _finite_losses(self) else (math.nan, math.nan)
        spec = self.specific
        values = {
            "assigned": a,
            "random": r,
            "heldout": self.heldout_gain(),
            "specific": spec.mean if spec else None,
            "se": spec.se if spec else None,
            "fraction": self.fraction,
            "scale": self.scale,
        }
        return {
            k: (round(v, 7) if v is not None and math.isfinite(v) else None)
            for k, v in values.items()
        }

    def heldout_gain(self) -> float | None:
        """Relative loss drop on the held-out draw, or None without one."""
        if self.loss_before_heldout is None or self.loss_after_heldout is None:
            return None
        return _relative_gain(self.loss_before_heldout, self.loss_after_heldout)


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
    if not (all(math.isfinite(x) for x in losses) and min(losses[0], losses[2]) > 0.0):
        return False
    if ev.loss_before_heldout is None or ev.loss_after_heldout is None:
        return True
    return (
        math.isfinite(ev.loss_before_heldout)
        and math.isfinite(ev.loss_after_heldout)
        and ev.loss_before_heldout > 0.0
    )


def _gains(ev: Evaluation) -> tuple[float, float]:
    """Relative loss drops ``(a, r)`` on assigned and on random samples."""
    return (
        _relative_gain(ev.loss_before_assigned, ev.loss_after_assigned),
        _relative_gain(ev.loss_before_random, ev.loss_after_random),
    )


def window_score(
    ev: Evaluation,
    cfg: ScoringConfig,
    r_reference: float | None = None,
    h_reference: float | None = None,
    record: Sequence[float] = (),
    alone: bool = False,
) -> float:
    """Score one upload for one window: >= 0, and 0 for anything not proven to help.

    With ``a`` and ``r`` the relative loss drops on assigned and on random samples:

    * ``a <= cfg.min_improvement`` or ``r < 0`` scores 0: an update trained on the assigned data
      must help there, and one that makes unseen data worse harms the shared model.
    * The pay is the proven own-data excess, ``specific.mean - cfg.proof_z * specific.se``
      floored at 0. Generic improvement (what random data shows too) is not proof of work: a
      copied, replayed or public update has plenty of it. ``cfg.unproven_credit`` adds that part
      back, but only to an upload whose excess is proven (default 0).
    * The result is multiplied by ``evidence.usefulness(r, r_reference, cfg.harm_tolerance)``:
      an update that helps unseen data much less than the window's median upload (a biased or
      weakened one) loses its credit. The same check, against ``h_reference`` (the median gain
      on the same held-out draw), applies to the gain on the reported held-out set when it was
      measured; the smaller of the two factors counts, so harm aimed at the samples progress is
      reported on costs as much as harm to the train data.

    Continuous in every measurement, so no small change flips a score from full to nothing.

    ``alone``: the upload is the only one the validator evaluated in the window. Its excess
    cannot be proven then: the reference it is measured against is the others' update, and
    without one the sample-to-sample spread of the gains (several times the excess of a
    window's training, ``docs/reliability.md``) swamps it, so an honest lone miner would be
    paid nothing and never merged. A lone upload that helps both its own samples and random
    ones is paid ``min(a, r)`` instead (the same credit and fraction factors apply). Nobody can
    buy this: the moment a second upload is evaluated in the window (a copy of the lone one
    included) every upload is held to the proven excess again, and a copy is then judged as
    one; an attacker who is the only miner trains the only model there is to merge.

    A partial upload (``k`` of ``H`` steps, ``fraction = k / H``; its own samples are drawn from
    the prefix it trained) earns ``fraction`` times that: the first steps of a window give the
    largest loss drops, so without the factor a miner training a fraction of the work would
    earn more than that fraction. Its gains are held to the full uploads' references, like any
    upload's: the fraction is a claim (its receipt names a prefix of public sample ids), and a
    check loosened for it would let a sender buy room for harm by claiming fewer steps.
    """
    if alone and _finite_losses(ev):
        a, r = _gains(ev)
        if not (a > cfg.min_improvement and r > 0.0):
            return 0.0
        score = min(a, r)
    elif not _payable(ev, cfg):
        return 0.0
    else:
        a, r = _gains(ev)
        score = ev.specific.proven(cfg.proof_z) + cfg.unproven_credit * min(a, r)
    fraction = min(1.0, max(0.0, ev.fraction))
    credit = _credit(ev, cfg, r, r_reference, h_reference, record)
    return score * credit * fraction


def _credit(
    ev: Evaluation,
    cfg: ScoringConfig,
    r: float,
    r_reference: float | None,
    h_reference: float | None,
    record: Sequence[float],
) -> float:
    """The factor the harm checks (random data, held-out data) and the track record leave: the
    smallest of them."""
    credit = usefulness(r, r_reference, cfg.harm_tolerance)
    h = ev.heldout_gain()
    if h is not None:
        credit = min(credit, usefulness(h, h_reference, cfg.harm_tolerance))
    if cfg.record_windows > 0:
        credit = min(credit, record_credit(record, cfg.record_full, cfg.record_floor))
    return credit


def random_reference(
    evaluations: Iterable[Evaluation],
    cfg: ScoringConfig,
    exclude: Collection[str] = (),
    sender: str | None = None,
) -> float | None:
    """Median gain on random samples over the uploads that could be paid (``_payable``: proven
    own-data work, a gain on the assigned samples, none lost on random ones), with a positive
    gain there, not a judged copy (``exclude``), the full uploads among them when any.

    Only proven uploads count, so uploads that prove nothing (copies, noise, free riders)
    cannot drag the reference down to shield a weak or biased update. Judged copies and
    uploads that help random data not at all are left out too: they are never paid, so sybils
    sending them would otherwise set the median for free (a majority of memorizers with
    negative gains would even switch the check off). Partial uploads help less by design, so
    they enter only when full uploads are fewer than half.

    ``sender``: the reference *for* that upload. When no other upload could be paid, it would
    be its own median and pass any check (a noise upload whose chance excess passed the proof,
    in a window where no honest upload's did, was paid that way in a loaded end-to-end run);
    the median positive gain of the other uploads that helped their own samples and are not
    judged copies stands in then: the window's typical improvement on unseen data, proven or
    not.
    """
    return _reference(evaluations, cfg, lambda ev: _gains(ev)[1], exclude, sender)


def gain_ratios(
    evaluations: Iterable[Evaluation], cfg: ScoringConfig, copies: Collection[str] = ()
) -> dict[str, float]:
    """``hotkey -> gain on random samples / its random_reference`` for every upload that could be
    paid (``_payable``) and is not a judged copy (``copies``); none without a reference.
    What each sender's track record is extended with (``record.extend_records``).

    A partial upload is compared with the same median as a full one (see ``window_score``).
    Only payable uploads, and no judged copy: an unpaid upload costs
    its sender nothing, so a generic update (trained on random data, large gain there) or a
    copy of the window's best upload sent now and then could otherwise bank a high ratio to
    carry biased uploads in the windows between. An upload that harms random data is unpaid
    this window and leaves the record as it was.
    """
    evaluations = list(evaluations)
    out = {}
    for ev in evaluations:
        if ev.hotkey not in copies and _payable(ev, cfg):
            reference = random_reference(evaluations, cfg, copies, ev.hotkey)
            if (q := gain_ratio(_gains(ev)[1], reference)) is not None:
                out[ev.hotkey] = q
    return out


def heldout_reference(
    evaluations: Iterable[Evaluation],
    cfg: ScoringConfig,
    exclude: Collection[str] = (),
    sender: str | None = None,
) -> float | None:
    """``random_reference`` for the gain on the held-out draw (uploads that measured one): a
    median at or below 0 would switch the held-out check off, so only positive gains count."""
    return _reference(evaluations, cfg, Evaluation.heldout_gain, exclude, sender)


def _reference(
    evaluations: Iterable[Evaluation],
    cfg: ScoringConfig,
    gain,
    exclude: Collection[str],
    sender: str | None,
) -> float | None:
    """The payable median of ``gain``; for ``sender`` without a payable other, the median
    positive ``gain`` of the others that helped their assigned samples and are not in
    ``exclude`` (see ``random_reference``)."""
    evaluations = list(evaluations)
    others = [ev for ev in evaluations if ev.hotkey != sender]
    if sender is None or _payable_median(others, cfg, gain, exclude, positive=True) is not None:
        return _payable_median(evaluations, cfg, gain, exclude, positive=True)
    gains = [
        g
        for ev in others
        if ev.hotkey not in exclude
        and _finite_losses(ev)
        and _gains(ev)[0] > cfg.min_improvement
        and (g := gain(ev)) is not None
        and math.isfinite(g)
        and g > 0.0
    ]
    return _median(sorted(gains))


def _payable(ev: Evaluation, cfg: ScoringConfig) -> bool:
    """Whether ``window_score`` can pay the upload at all (its zero conditions): finite losses,
    a proven own-data excess, an assigned-data gain above ``cfg.min_improvement`` and no harm
    to random data."""
    if not (_finite_losses(ev) and ev.specific is not None):
        return False
    a, r = _gains(ev)
    return ev.specific.proven(cfg.proof_z) > 0 and a > cfg.min_improvement and r >= 0.0


def _payable_median(
    evaluations: Iterable[Evaluation],
    cfg: ScoringConfig,
    gain,
    exclude: Collection[str] = (),
    positive: bool = False,
) -> float | None:
    """Median of ``gain(ev)`` over the payable uploads not in ``exclude`` with a finite gain
    (a positive one with ``positive``); only the full uploads among them when they are at least
    half (cheap partial uploads cannot pull the median down, nor one full upload set it for
    many partial ones); None if there are none."""
    kept = [
        (ev.fraction >= 1.0, g)
        for ev in evaluations
        if ev.hotkey not in exclude
        and _payable(ev, cfg)
        and (g := gain(ev)) is not None
        and math.isfinite(g)
        and (g > 0.0 or not positive)
    ]
    full = [g for is_full, g in kept if is_full]
    return _median(sorted(full if 2 * len(full) >= len(kept) else [g for _, g in kept]))


def _median(rs: list[float]) -> float | None:
    """The median of sorted ``rs``, None if empty."""
    if not rs:
        return None
    mid = len(rs) // 2
    return rs[mid] if len(rs) % 2 else (rs[mid - 1] + rs[mid]) / 2


def _evaluated(
    evaluations: Iterable[Evaluation],
    cfg: ScoringConfig,
    records: Mapping[str, Sequence[float]],
    copies: Collection[str],
    alone: bool | None = None,
) -> dict[str, Verdict]:
    """Verdicts of the evaluated uploads; one evaluation per hotkey. ``alone``: the window had
    one upload (None: when one was evaluated)."""
    evaluations = list(evaluations)
    if alone is None:
        alone = len(evaluations) == 1  # nothing to prove an excess against (``window_score``)
    alone = alone and len(evaluations) == 1
    out: dict[str, Verdict] = {}
    for ev in evaluations:
        if ev.hotkey in out:
            raise ValueError(f"two evaluations for hotkey {ev.hotkey!r}")
        if _finite_losses(ev):
            partial = f"partial {ev.fraction:.2f}" if ev.fraction < 1.0 else ""
            reference = random_reference(evaluations, cfg, copies, ev.hotkey)
            h_reference = heldout_reference(evaluations, cfg, copies, ev.hotkey)
            score = window_score(
                ev, cfg, reference, h_reference, records.get(ev.hotkey, ()), alone=alone
            )
            detail = ", ".join(x for x in (partial, "alone" if alone else "") if x)
            out[ev.hotkey] = Verdict(ev.hotkey, score, "scored", detail)
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
    records: Mapping[str, Sequence[float]] | None = None,
    alone: bool | None = None,
) -> dict[str, Verdict]:
    """Every hotkey's verdict for one window; every verdict but ``"scored"`` has score 0.

    ``rejected`` maps hotkey -> reason code; ``copies`` is ``detect_copies``' copier -> original.
    A hotkey found in several inputs takes the first reason of missing, rejected, late, stale,
    copied, scored. Evaluations whose losses are not finite become ``rejected`` with
    ``non_finite_loss``. ``records`` are the senders' track records with this window's ratios
    already in (``gain_ratios``, ``record.extend_records``); without them no record is judged.
    ``alone``: whether the window had a single upload (a validator that evaluates a sample
    knows: one evaluation is not one upload). The result is keyed by hotkey and sorted by it.
    """
    overridden = {*missing, *late, *stale, *rejected, *copies}  # never paid this window
    verdicts = _evaluated(evaluations, cfg, records or {}, overridden, alone)
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
