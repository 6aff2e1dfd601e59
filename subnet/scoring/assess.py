"""Measuring a window's uploads on one model: the per-sample losses behind every score.

This is the one part of scoring that runs the model (forward passes only, no I/O): for each
upload it measures the loss of every evaluated sample before and after applying the upload
alone (``theta - delta``, outer learning rate 1) and after applying the window's reference
update, on a subset of the sender's assigned samples and on the validator's random samples.
Every upload is measured as the holder merges it: clipped to the window's median norm
(``AsMerged``), so sending a bigger update than one trained buys no more pay.
From those it builds each upload's ``Evaluation`` (mean losses and own-data ``Specificity``),
and for every fingerprint match the two fits that ``copies.judge_matches`` compares.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence, Set

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from subnet.scoring.copies import Match
from subnet.scoring.evidence import Specificity, relative_gains, specificity
from subnet.scoring.window import Evaluation
from subnet.training.aggregation import clip_scales, clip_to_median_norm, global_norm
from subnet.training.pseudograd import load_parameters

Delta = Mapping[str, Tensor]
Batches = Callable[[list[int]], Iterable[tuple[Tensor, Tensor]]]


@torch.no_grad()
def sample_losses(model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]]) -> list[float]:
    """Mean next-token cross-entropy of each sample (row) of ``batches``, in order."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[float] = []
    try:
        for x, y in batches:
            logits, _ = model(x.to(device))
            # Rows of the vocabulary, contiguous: 3.3x faster than the class dimension second
            # ([B, V, T], strided) for hypertrain-20m's 45,782 tokens (0.031 s vs 0.103 s a batch)
            loss = F.cross_entropy(
                logits.float().flatten(0, 1), y.to(device).flatten(), reduction="none"
            )
            out += loss.view(y.shape).mean(dim=1).tolist()
    finally:
        model.train(was_training)
    return out


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def own_subset(ids: Sequence[int], n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` of the assigned ``ids``, drawn unpredictably (all of them when ``n >= len(ids)``).

    Never a fixed slice: a miner that knew which samples are evaluated would train only those.
    ``rng`` is for tests; a validator leaves it None (fresh system entropy).
    """
    if n >= len(ids):
        return list(ids)
    return (rng or random.SystemRandom()).sample(list(ids), n)


COMMON_FROM = 4  # uploads from which one shared reference replaces the leave-one-out ones
# Uploads the shared reference averages, at most: past it a fresh draw of that many each window.
# Reading an upload into the reference costs about as much as screening it; at 256 uploads
# the whole window's reference was 0.4 miner-windows of hypertrain-20m, a draw of 64 a quarter.
COMMON_MOST = 64


class AsMerged(Mapping):
    """The window's uploads as the holder merges them: each scaled by ``min(1, median / norm)``.

    Without it an upload's measured gains (and its pay) grow with its size: a miner that sends
    ``3 x`` its honest update takes a larger share, though the holder clips it back to the
    median norm before merging (``scoring_sim.py``-style run: 0.70 of one window's scores).
    ``norms`` are the uploads' global L2 norms when the caller has them (a sparse codec computes
    them from the payload); otherwise each upload is decoded once to measure it.

    Who sets the median: never an all-zero upload; the senders in ``standing`` (the validator's
    miners with a positive moving score) when any of them uploaded; otherwise every group of
    ``twins`` once, at its largest member's norm (a near-zero copy cannot stand in for its
    original). The holder takes its median over the uploads it merges; without these rules a
    flood of zero or near-zero uploads from fresh hotkeys would pull the median to 0 and every
    honest upload would be measured as nothing. Like ``deltas``, decodes on every access.
    """

    def __init__(
        self,
        deltas: Mapping[str, Delta],
        norms: Mapping[str, float] | None = None,
        twins: Mapping[str, str] | None = None,
        standing: Set[str] = frozenset(),
    ) -> None:
        self._deltas = deltas
        group = _grouper(twins, deltas)
        # With ``norms`` of more uploads than are measured (a validator's sample), the median
        # is set by all of them, as the holder's is
        names = norms.keys() | deltas.keys() if norms is not None else deltas.keys()
        sizes = {n: norms[n] if norms is not None else global_norm(deltas[n]) for n in names}
        real = {n: size for n, size in sizes.items() if size > 0}
        setters = [size for n, size in real.items() if n in standing]
        if not setters:
            largest: dict[str, float] = {}
            for n, size in real.items():
                largest[group(n)] = max(size, largest.get(group(n), 0.0))
            setters = list(largest.values())
        median = statistics.median(setters) if setters else math.inf
        self.scales: dict[str, float] = {
            n: 1.0 if size <= median else median / size for n, size in sizes.items()
        }
        self.norms = {n: size * self.scales[n] for n, size in sizes.items()}  # as measured

    def __getitem__(self, hotkey: str) -> Delta:
        delta, scale = self._deltas[hotkey], self.scales[hotkey]
        return delta if scale == 1.0 else {k: v.float() * scale for k, v in delta.items()}

    def add_into(self, hotkey: str, into: dict[str, Tensor], weight: float) -> None:
        """``into += weight * (the upload as merged)``: through the uploads' own ``add_into``
        where they have one (a sparse codec adds only what it sent, no dense decode)."""
        add_into(self._deltas, hotkey, into, weight * self.scales[hotkey])

    def __iter__(self):
        return iter(self._deltas)

    def __len__(self) -> int:
        return len(self._deltas)


def leave_one_out(
    deltas: Mapping[str, Delta], twins: Mapping[str, str] | None = None
) -> Callable[[str], Delta | None]:
    """``hotkey -> mean of the other uploads``, each clipped to the median norm first.

    Leaving the upload itself out keeps its own specificity from being subtracted from it, and
    clipping keeps one huge update from dominating everyone's reference. With ``twins``
    (``copies.twins``) an upload's whole group of near-identical uploads is left out, and
    every other group counts once. None for an upload with nothing else to compare with (its
    reference gain is then taken as 0).
    """
    group = _grouper(twins, deltas)
    names = sorted(deltas)
    reps = sorted({group(n) for n in names})
    if len(reps) < 2:
        return lambda _hk: None
    clipped = dict(zip(reps, clip_to_median_norm([deltas[n] for n in reps]), strict=True))
    total = {k: sum(c[k] for c in clipped.values()) for k in clipped[reps[0]]}
    scale = 1.0 / (len(reps) - 1)
    return lambda hk: {k: (total[k] - clipped[group(hk)][k]) * scale for k in total}


def _grouper(twins: Mapping[str, str] | None, deltas: Mapping[str, Delta]) -> Callable[[str], str]:
    """``hotkey -> its group's representative`` (itself when it has no twin, or when the
    representative named is not among ``deltas``)."""
    twins = {hk: rep for hk, rep in (twins or {}).items() if rep in deltas}
    return lambda hk: twins.get(hk, hk)


def references(
    deltas: Mapping[str, Delta],
    twins: Mapping[str, str] | None = None,
    norms: Mapping[str, float] | None = None,
    rng: random.Random | None = None,
) -> Callable[[str], tuple[str, Delta | None]]:
    """``hotkey -> (cache key, reference update)`` for the window's uploads.

    From ``COMMON_FROM`` uploads on, one shared reference (the mean of all, clipped) serves
    everyone: its losses are measured once per sample set, and including the upload itself
    shrinks every upload's excess by the same factor of about ``1 - 1/n``, which changes no
    share. Below that, the leave-one-out mean (a lone or paired upload would cancel itself).

    Past ``COMMON_MOST`` groups the reference is the clipped mean of ``COMMON_MOST`` of them,
    drawn afresh each window from ``rng`` (a validator leaves it None: system entropy, so no
    sender knows whether it is in): an unbiased estimate of the whole window's mean whose cost
    does not grow with the window. Clipping still uses every upload's norm. Every measured
    upload is compared with the same reference, so the draw moves no share within a window;
    a sender that floods hotkeys is drawn in proportion, as it is counted in the full mean.

    ``twins`` (``copies.twins``) name the groups of near-identical uploads of the window: each
    group enters the reference once, through its representative.

    ``deltas`` may decode on every access (the validator's uploads stay compressed): the shared
    reference is summed one upload at a time, so memory does not grow with the uploads, and
    ``norms`` (``AsMerged.norms``) spare decoding each upload once more to clip it.
    """
    group = _grouper(twins, deltas)
    names = sorted({group(n) for n in deltas})
    if len(names) < COMMON_FROM:
        loo = leave_one_out(deltas, twins)
        return lambda hk: (f"loo/{group(hk)}", loo(hk))
    sizes = [norms[n] if norms else global_norm(deltas[n]) for n in names]
    scales = dict(zip(names, clip_scales(sizes), strict=True))
    if len(names) > COMMON_MOST:
        names = sorted((rng or random.SystemRandom()).sample(names, COMMON_MOST))
    common: dict[str, Tensor] = {}
    for name in names:
        add_into(deltas, name, common, scales[name] / len(names))
    return lambda _hk: ("common", common)


def add_into(
    deltas: Mapping[str, Delta], name: str, into: dict[str, Tensor], weight: float
) -> None:
    """``into += weight * deltas[name]``: by the mapping's own ``add_into`` when it has one
    (uploads kept compressed add only the coordinates they sent: a window of 256 sparse uploads
    of a 20M model costs no dense decode each), else decoded."""
    adder = getattr(deltas, "add_into", None)
    if adder is not None:
        adder(name, into, weight)
        return
    for k, t in deltas[name].items():
        part = t.float() * weight
        if k in into:
            into[k].add_(part)
        else:
            into[k] = part


class WindowProbe:
    """Per-sample losses of one model state with an update applied, cached per sample set."""

    def __init__(self, model: nn.Module, state: Mapping[str, Tensor], batches: Batches) -> None:
        self.model, self.state, self.batches = model, state, batches
        self._cache: dict[tuple[str, tuple[int, ...]], list[float]] = {}

    def losses(
        self, delta: Delta | None, ids: Sequence[int], key: str | None = None
    ) -> list[float]:
        """Losses of ``ids`` under ``theta - delta`` (``theta`` itself when ``delta`` is None).

        The model itself is cached as ``"base"``; an update is cached under ``key`` when given.
        """
        key = "base" if delta is None else key
        if key is not None and (key, tuple(ids)) in self._cache:
            return self._cache[(key, tuple(ids))]
        params = self.state if delta is None else {k: v - delta[k] for k, v in self.state.items()}
        load_parameters(self.model, params)
        try:
            out = sample_losses(self.model, self.batches(list(ids)))
        finally:
            load_parameters(self.model, self.state)
        if key is not None:
            self._cache[(key, tuple(ids))] = out
        return out


def _gains_of(probe: WindowProbe, ref: tuple[str, Delta | None], ids: Sequence[int]) -> list[float]:
    """Relative gains of ``ids`` under the reference ``(key, delta)``; zeros without one."""
    key, delta = ref
    if delta is None:
        return [0.0] * len(ids)
    return relative_gains(probe.losses(None, ids), probe.losses(delta, ids, key))


def assess_window(
    probe: WindowProbe,
    deltas: Mapping[str, Delta],
    own_ids: Mapping[str, Sequence[int]],
    random_ids: Sequence[int],
    matches: Iterable[Match] = (),
    match_ids: Callable[[Match], Sequence[int]] | None = None,
    heldout_ids: Sequence[int] = (),
    norms: Mapping[str, float] | None = None,
    twins: Mapping[str, str] | None = None,
    standing: Set[str] = frozenset(),
    measured: Set[str] | None = None,
    rng: random.Random | None = None,
) -> tuple[list[Evaluation], dict[Match, tuple[float, float, float]]]:
    """Evaluations of every upload, and ``(own, other, se)`` specificity for every match (``se``:
    the standard error of their difference).

    Each upload is evaluated as merged (``AsMerged``: clipped to the window's median norm, set
    by the senders in ``standing`` when any uploaded; ``norms`` spare a decode per upload),
    against a reference that counts each group of near-identical uploads of the window
    (``twins``) once.

    ``own_ids[hk]`` are the (validator-chosen, ``own_subset``) assigned samples evaluated for
    ``hk``; ``match_ids(m)`` the samples of ``m.source`` in ``m.window`` to compare with. The
    reference is ``references``'. Forward passes per upload: 3 on its own samples and 1 on the
    random ones (plus 2 on the random ones once), and 1 per match within the window (3 for a
    match with a past window), with the shared reference of 4 or more uploads. With
    ``heldout_ids`` (``draws.heldout_draw``, a draw from the reported held-out set) each upload
    is also measured there (1 pass on those samples, plus 1 for the model itself, once).

    ``measured``: the uploads evaluated (a validator's sample, ``subnet.scoring.sample``), all
    of them when None; the median norm and the reference are still every upload's in
    ``deltas``, so a sample is measured as the whole window would measure it (past
    ``COMMON_MOST`` uploads the reference is a draw of them, from ``rng``: ``references``).
    """
    deltas = AsMerged(deltas, norms, twins, standing)
    base_rand = probe.losses(None, random_ids)
    reference_of = references(deltas, twins, deltas.norms, rng)
    rand_gains: dict[str, _RandomGains] = {}
    specs: dict[str, Specificity] = {}
    evaluations = []
    for hk in sorted(deltas if measured is None else set(deltas) & set(measured)):
        ids, reference = own_ids[hk], reference_of(hk)
        evaluation, specs[hk], rand_gains[hk] = _measure_upload(
            probe, deltas, hk, ids, reference, random_ids, base_rand, heldout_ids
        )
        evaluations.append(evaluation)
    fits: dict[Match, tuple[float, float, float]] = {}
    for m in matches:
        if m.hotkey not in specs or match_ids is None:
            continue
        fits[m] = _match_fit(probe, deltas, m, match_ids(m), reference_of, specs, rand_gains)
    return evaluations, fits


# An upload's relative gains on the random samples, and its reference's on the same samples.
_RandomGains = tuple[list[float], list[float]]


def _measure_upload(
    probe: WindowProbe,
    deltas: AsMerged,
    hk: str,
    ids: Sequence[int],
    reference: tuple[str, Delta | None],
    random_ids: Sequence[int],
    base_rand: list[float],
    heldout_ids: Sequence[int],
) -> tuple[Evaluation, Specificity, _RandomGains]:
    """One upload's evaluation, own-data specificity and random-data gains, with one decoded
    upload alive at a time."""
    delta = deltas[hk]
    base, after = probe.losses(None, ids), probe.losses(delta, ids)
    after_rand = probe.losses(delta, random_ids)
    heldout = (
        (_mean(probe.losses(None, heldout_ids)), _mean(probe.losses(delta, heldout_ids)))
        if heldout_ids
        else (None, None)
    )
    del delta  # one decoded upload alive at a time
    rand_gains = (
        relative_gains(base_rand, after_rand),
        _gains_of(probe, reference, random_ids),
    )
    spec = specificity(relative_gains(base, after), _gains_of(probe, reference, ids), *rand_gains)
    evaluation = Evaluation(
        hk,
        _mean(base),
        _mean(after),
        _mean(base_rand),
        _mean(after_rand),
        spec,
        1.0,
        *heldout,
        scale=deltas.scales[hk],
    )
    return evaluation, spec, rand_gains


def _match_fit(
    probe: WindowProbe,
    deltas: AsMerged,
    m: Match,
    ids: Sequence[int],
    reference_of: Callable[[str], tuple[str, Delta | None]],
    specs: Mapping[str, Specificity],
    rand_gains: Mapping[str, _RandomGains],
) -> tuple[float, float, float]:
    """``(own, other, se)`` for one match: the upload's fit to its own samples against its fit
    to ``ids``, the matched source's samples."""
    reference = reference_of(m.hotkey)
    upload = relative_gains(probe.losses(None, ids), probe.losses(deltas[m.hotkey], ids))
    other = specificity(upload, _gains_of(probe, reference, ids), *rand_gains[m.hotkey])
    own = specs[m.hotkey]
    return (own.mean, other.mean, math.sqrt(own.se**2 + other.se**2))
