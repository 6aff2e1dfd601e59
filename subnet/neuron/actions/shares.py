"""Sticky file shares (``file_shares``): each trainer owns one contiguous share of the data.

The train split is cut into as many contiguous shares as there are trainers (sorted by
hotkey); trainer ``i`` owns share ``i`` for the whole run and, each round, trains on the next
samples of its own share (wrapping), never on anyone else's. A pure function of (trainers,
split size, window), so readers check receipts against the same ids.
"""

from __future__ import annotations

from collections.abc import Callable

from ...data import TokenDataset
from ..bindings import samples_per_window
from ..runtime import Runtime
from .grants import trainers


def share_bounds(index: int, count: int, total: int) -> range:
    """The sample ids of share ``index`` of ``count`` over ``total`` samples."""
    return range(index * total // count, (index + 1) * total // count)


def share_ids(share: range, window: int, n: int) -> list[int]:
    """``n`` ids of ``share`` for ``window``: the next slice of the share, wrapping."""
    if len(share) == 0:
        return []
    return [share[(window * n + j) % len(share)] for j in range(min(n, len(share)))]


def file_shares(rt: Runtime, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """Data rule: ``hotkey -> sample ids`` from its own share (empty for a non-trainer)."""
    members, total, n = trainers(rt), data.split_samples("train"), samples_per_window(rt)

    def ids(hotkey: str) -> list[int]:
        if hotkey not in members:
            return []
        return share_ids(share_bounds(members.index(hotkey), len(members), total), window, n)

    return ids
