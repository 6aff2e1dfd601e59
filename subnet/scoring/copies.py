"""Copy detection: uploads whose top-k coordinates nearly coincide, and who uploaded first.

Two miners who trained honestly on different assigned data pick overlapping but clearly
different top-k coordinates; a miner who re-uploads someone else's pseudo-gradient (perhaps
rescaled or with a little noise on the values) keeps almost the same coordinates. The index set
is therefore the fingerprint, and upload order decides who copied whom.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

import numpy as np

from subnet.scoring.config import ScoringConfig
from subnet.scoring.overlap import as_sorted_array, intersection_size, pair_overlaps


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


def index_overlap(a: Set[int] | np.ndarray, b: Set[int] | np.ndarray) -> float:
    """``|a & b| / min(|a|, |b|)``, in [0, 1]; 0 when either set is empty.

    Dividing by the smaller set catches a copier who uploads only a subset of the original's
    coordinates. An empty upload carries nothing to copy, so it matches nothing.
    """
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
