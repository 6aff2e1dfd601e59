"""Copy detection: uploads whose top-k coordinates nearly coincide, and who uploaded first.

Two miners who trained honestly on different assigned data pick overlapping but clearly
different top-k coordinates; a miner who re-uploads someone else's pseudo-gradient (perhaps
rescaled or with a little noise on the values) keeps almost the same coordinates. The index set
is therefore the fingerprint, and upload order decides who copied whom.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from subnet.scoring.config import ScoringConfig


@dataclass(frozen=True)
class Upload:
    """One upload's fingerprint for copy detection.

    ``order`` sorts earlier uploads first, e.g. ``(observed_block, last_modified_ts, hotkey)``;
    ending it with the hotkey keeps ties deterministic. ``indices`` are the flattened global
    coordinates the upload carries (its top-k set), e.g. ``frozenset(decoded_indices.tolist())``.
    """

    hotkey: str
    order: tuple
    indices: Set[int]


def index_overlap(a: Set[int], b: Set[int]) -> float:
    """``|a & b| / min(|a|, |b|)``, in [0, 1]; 0 when either set is empty.

    Dividing by the smaller set catches a copier who uploads only a subset of the original's
    coordinates. An empty upload carries nothing to copy, so it matches nothing.
    """
    smaller = min(len(a), len(b))
    if smaller == 0:
        return 0.0
    if len(a) > len(b):  # iterate over the smaller set
        a, b = b, a
    return len(a & b) / smaller


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

    Cost is one set intersection per pair: O(n^2 k) for n uploads of k indices each.
    """
    ordered = _sorted_uploads(uploads)
    rank = {u.hotkey: i for i, u in enumerate(ordered)}
    copies: dict[str, str] = {}
    for j, later in enumerate(ordered):
        roots = [
            copies.get(earlier.hotkey, earlier.hotkey)
            for earlier in ordered[:j]
            if index_overlap(earlier.indices, later.indices) >= cfg.copy_overlap
        ]
        if roots:
            copies[later.hotkey] = min(roots, key=rank.__getitem__)
    return dict(sorted(copies.items()))
