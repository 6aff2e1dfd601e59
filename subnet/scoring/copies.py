"""Copy detection: uploads whose top-k coordinates nearly coincide, and which one is the copy.

Two miners who trained honestly on different assigned data pick overlapping but clearly
different top-k coordinates (measured: at most about 0.23 on the ``tiny`` preset, and about
0.13 against the previous window's uploads, docs/reliability.md); a miner who re-uploads someone
else's pseudo-gradient (perhaps rescaled, with a little noise on the values, or a subset of it)
keeps almost the same coordinates, and so does one that replays an earlier window's upload. The
index set is therefore the fingerprint that finds *candidate* pairs (``find_matches``).

Who copied whom is not decided by who reached the bucket first, which an attacker can win
within a block: an update fits the samples it was trained on. ``judge_matches`` flags an upload
as a copy when it fits the other upload's assigned samples better than its own sender's
(``subnet.scoring.evidence``). The original is never flagged for being copied.
``detect_copies`` (upload order) is kept for callers without own-data evidence.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

import numpy as np

from subnet.scoring.config import ScoringConfig
from subnet.scoring.overlap import (
    Fingerprint,
    as_sorted_array,
    estimate_overlap,
    fingerprint,
    fingerprint_overlaps,
    intersection_size,
    pair_overlaps,
    screened_jaccard,
)

#: An upload's top-k set as copy checks take it: a set, a sorted index array, or its bounded
#: :class:`~subnet.scoring.overlap.Fingerprint` (what a validator keeps across windows).
Indices = Set[int] | np.ndarray | Fingerprint


@dataclass(frozen=True)
class Upload:
    """One upload's fingerprint for copy detection.

    ``order`` sorts earlier uploads first, e.g. ``(observed_block, last_modified_ts, hotkey)``;
    ending it with the hotkey keeps ties deterministic. ``indices`` are the flattened global
    coordinates the upload carries (its top-k set): a set, or (much faster for large uploads) a
    sorted ``int64`` array such as :meth:`subnet.compression.Compressor.support` returns.
    """

    hotkey: str
    order: tuple
    indices: Set[int] | np.ndarray


def index_overlap(a: Indices, b: Indices) -> float:
    """``|a & b| / min(|a|, |b|)``, in [0, 1]; 0 when either set is empty.

    Dividing by the smaller set catches a copier who uploads only a subset of the original's
    coordinates. An empty upload carries nothing to copy, so it matches nothing. With a
    fingerprint on either side the overlap is estimated from fingerprints (exactly for sets of
    at most ``overlap.SKETCH`` indices).
    """
    if isinstance(a, Fingerprint) or isinstance(b, Fingerprint):
        salt = (a if isinstance(a, Fingerprint) else b).salt  # type: ignore[union-attr]
        return estimate_overlap(_print(a, salt), _print(b, salt))
    a, b = as_sorted_array(a), as_sorted_array(b)
    smaller = min(a.size, b.size)
    return intersection_size(a, b) / smaller if smaller else 0.0


def _sorted_uploads(uploads: Iterable[Upload]) -> list[Upload]:
    """Uploads earliest first; the hotkey breaks ties in ``order``. Rejects duplicate hotkeys."""
    ordered = sorted(uploads, key=lambda u: (u.order, u.hotkey))
    hotkeys = [u.hotkey for u in ordered]
    if len(set(hotkeys)) != len(hotkeys):
        raise ValueError("two uploads with the same hotkey")
    return ordered


def detect_copies(uploads: Iterable[Upload], cfg: ScoringConfig) -> dict[str, str]:
    """Map each copier's hotkey to the hotkey of the original it (transitively) copied.

    For every pair with ``index_overlap >= cfg.copy_overlap`` the later uploader is the copier.
    A copier points to the original at the root of its chain: if C matches B and B matches A,
    both B and C map to A, even when C and A alone fall below the threshold. When an upload
    matches several earlier uploads, the earliest root wins. The result does not depend on the
    order of ``uploads`` and is sorted by copier hotkey.

    Overlaps come from :func:`subnet.scoring.overlap.pair_overlaps`: a secret random sample of
    every index set screens the pairs, and only pairs near the threshold are intersected exactly
    (64 uploads of 300 k indices: well under a second instead of about 10 s of set intersections).
    """
    ordered = _sorted_uploads(uploads)
    rank = {u.hotkey: i for i, u in enumerate(ordered)}
    overlaps = pair_overlaps([as_sorted_array(u.indices) for u in ordered], cfg.copy_overlap)
    copies: dict[str, str] = {}
    for j, later in enumerate(ordered):
        roots = [
            copies.get(earlier.hotkey, earlier.hotkey)
            for i, earlier in enumerate(ordered[:j])
            if overlaps.get((i, j), 0.0) >= cfg.copy_overlap
        ]
        if roots:
            copies[later.hotkey] = min(roots, key=rank.__getitem__)
    return dict(sorted(copies.items()))


@dataclass(frozen=True)
class Match:
    """Upload of ``hotkey`` this window overlaps ``source``'s upload of ``window`` by ``overlap``.

    ``window`` equals the current window for two uploads of the same window (then both
    directions are listed), or is an earlier window for a possible replay; ``source`` may be
    ``hotkey`` itself (a miner re-sending its own old update).
    """

    hotkey: str
    source: str
    window: int
    overlap: float


def _print(indices: Indices, salt: int) -> Fingerprint:
    return indices if isinstance(indices, Fingerprint) else fingerprint(indices, salt)


def _salt(*groups: Iterable[Indices]) -> int:
    """The salt of the first fingerprint given, or a fresh secret one."""
    for group in groups:
        for value in group:
            if isinstance(value, Fingerprint):
                return value.salt
    return secrets.randbits(64)


def find_matches(
    window: int,
    current: Mapping[str, Indices],
    history: Mapping[tuple[int, str], Indices],
    cfg: ScoringConfig,
) -> list[Match]:
    """Every pair of uploads with ``index_overlap >= cfg.copy_overlap``, sorted.

    ``current`` maps hotkey -> top-k set (or fingerprint) of this window's uploads; ``history``
    maps ``(window, hotkey)`` -> those of recent windows' uploads (entries of ``window`` itself
    or later are ignored), as :class:`FingerprintLog` keeps them. Overlaps are estimated from
    fingerprints (exact for sets of at most ``overlap.SKETCH`` indices); every pair is screened
    at once (``overlap.fingerprint_overlaps``), so n uploads against h kept ones cost
    O((n + h) SKETCH) memory and one vectorised pass, plus a sketch comparison per candidate.
    """
    salt = _salt(current.values(), history.values())
    hotkeys = sorted(current)
    now = [_print(current[hk], salt) for hk in hotkeys]
    past = [(key, _print(v, salt)) for key, v in sorted(history.items()) if key[0] < window]
    out: list[Match] = []
    threshold = cfg.copy_overlap
    for (i, j), overlap in fingerprint_overlaps(now, None, threshold).items():
        if overlap >= threshold:
            a, b = hotkeys[i], hotkeys[j]
            out += [Match(a, b, window, overlap), Match(b, a, window, overlap)]
    cross = fingerprint_overlaps(now, [v for _, v in past], threshold)
    for (i, j), overlap in cross.items():
        if overlap >= threshold:
            (w, source), _ = past[j]
            out.append(Match(hotkeys[i], source, w, overlap))
    return sorted(out, key=lambda m: (m.hotkey, m.window, m.source))


def twins(matches: Iterable[Match], window: int) -> dict[str, str]:
    """``hotkey -> representative`` for the uploads of ``window`` that match each other.

    Near-identical uploads of one window (a copy and its original, whichever is which) form one
    group, named by its first hotkey in sorted order; a hotkey in no group is absent. The
    reference an upload is measured against counts each group once (``assess.references``):
    counted twice, the original's own-data specificity would sit in the reference at double
    weight and a copier would lower its victim's pay without ever being paid itself.
    """
    parent: dict[str, str] = {}

    def root(hk: str) -> str:
        while parent.get(hk, hk) != hk:
            hk = parent[hk]
        return hk

    for m in matches:
        if m.window != window or m.hotkey == m.source:
            continue
        a, b = sorted((root(m.hotkey), root(m.source)))
        parent.setdefault(a, a)
        parent[b] = a
    return {hk: root(hk) for hk in parent}


def judge_matches(
    matches: Iterable[Match],
    fits: Mapping[Match, tuple[float, ...]],
    z: float = 0.0,
    window: int | None = None,
) -> dict[str, str]:
    """Copier hotkey -> ``"<source>@<window>"`` for the matches that are copies.

    **Another miner's earlier upload** (``m.window < window``, ``m.source != m.hotkey``) is a
    replay, whatever the fits say: it was public before this window began, so there is no
    question who came first, and nobody can send an upload that nearly shares the top-k set of
    another miner's *future* upload (it depends on that miner's private error feedback and on a
    model version not yet published), so no honest upload is framed by one. Honest uploads of
    different miners share at most about a quarter of their top-k sets (docs/reliability.md).

    Otherwise the evidence decides. ``fits[m] = (own, other[, se])``: how specific
    ``m.hotkey``'s update is to its own assigned samples and to ``m.source``'s samples of
    ``m.window`` (``Specificity.mean``), and the standard error of their difference. The upload
    is a copy when ``other - own > margin``: it was trained on someone else's data (or on its
    sender's data of another window, for a miner re-sending its own old update). Two
    near-identical uploads of one window (which commit-reveal leaves to colluders) compare the
    same update on the same two sample sets, so at most one side can be flagged, the one whose
    own samples the update fits worse, and only by more than ``z * se`` (``scoring.copy_z``), so
    a noise flip does not flag the original; a copy let through proves nothing on its own
    samples and is paid about nothing. A miner's own earlier upload is judged on the plain
    comparison. With ``window`` None every match is judged on the evidence, with the margin.
    When an upload matches several, the best-fitting source is named (a replay without fits:
    the largest overlap). Matches without an entry in ``fits`` flag nothing but replays.
    """
    best: dict[str, tuple[float, str]] = {}
    for m in matches:
        replay = window is not None and m.window < window and m.source != m.hotkey
        if m in fits:
            own, other, *rest = fits[m]
        elif replay:
            own, other, rest = 0.0, m.overlap, []
        else:
            continue
        margin = z * rest[0] if rest and window in (None, m.window) else 0.0
        if (replay or other - own > margin) and (m.hotkey not in best or other > best[m.hotkey][0]):
            best[m.hotkey] = (other, f"{m.source}@{m.window}")
    return {hk: detail for hk, (_, detail) in sorted(best.items())}


class FingerprintLog:
    """The fingerprints of the last ``keep`` windows' accepted uploads, for replay checks.

    Each upload is kept as a :class:`~subnet.scoring.overlap.Fingerprint` (33 kB at most,
    whatever the upload's size) under this log's secret salt, so what a validator keeps grows
    by a fixed amount per upload and no miner knows which of its indices the sketch holds.
    """

    def __init__(self, keep: int, salt: int | None = None) -> None:
        self.keep = keep
        self.salt = secrets.randbits(64) if salt is None else salt
        self.entries: dict[tuple[int, str], Fingerprint] = {}

    def of(self, indices: Indices | None) -> Fingerprint | None:
        """``indices`` as this log's fingerprint (``None`` stays ``None``: a dense upload)."""
        return None if indices is None else _print(indices, self.salt)

    def recent(self, window: int) -> dict[tuple[int, str], Fingerprint]:
        """Entries of the ``keep`` windows before ``window``."""
        return {k: v for k, v in self.entries.items() if window - self.keep <= k[0] < window}

    def record(self, window: int, uploads: Mapping[str, Indices]) -> None:
        """Keep ``window``'s fingerprints; forget windows older than ``keep``."""
        for hotkey, indices in uploads.items():
            self.entries[(window, hotkey)] = _print(indices, self.salt)
        self.entries = {k: v for k, v in self.entries.items() if k[0] > window - self.keep}

    @property
    def nbytes(self) -> int:
        """Bytes the kept fingerprints occupy."""
        return sum(v.nbytes for v in self.entries.values())


def overlap_summary(
    current: Mapping[str, Indices], history: Mapping[tuple[int, str], Indices], top: int = 4
) -> dict[str, dict[str, float]]:
    """Per hotkey, its ``top`` largest overlaps: ``{other: v}`` this window, ``{"w/other": v}`` past.

    What the validator logs so the copy threshold can be checked against honest overlap. Every
    pair is screened at once and only the likeliest ``4 * top`` of each upload are estimated
    from their sketches (all of them for exact fingerprints).
    """
    salt = _salt(current.values(), history.values())
    hotkeys = sorted(current)
    now = [_print(current[hk], salt) for hk in hotkeys]
    past = [(f"{w}/{k}", _print(v, salt)) for (w, k), v in history.items()]
    out: dict[str, dict[str, float]] = {hk: {} for hk in hotkeys}
    for group in ([(hk, f) for hk, f in zip(hotkeys, now, strict=True)], past):
        if not now or not group:
            continue
        screen = screened_jaccard(now, [f for _, f in group])
        for i, hk in enumerate(hotkeys):
            likely = [j for j in np.argsort(-screen[i], kind="stable") if group[j][1] is not now[i]]
            row = [(group[j][0], estimate_overlap(now[i], group[j][1])) for j in likely[: 4 * top]]
            best = sorted(row, key=lambda kv: -kv[1])[:top]
            out[hk].update({k: round(v, 4) for k, v in best})
    return out
