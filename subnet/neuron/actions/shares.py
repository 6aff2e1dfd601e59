"""Sticky file shares (``file_shares``): each trainer owns its own files of the dataset.

The train split's files (the token shards under the run's data prefix, in manifest order) are
cut into as many contiguous runs of whole files as there are trainers (sorted by hotkey):
trainer ``i`` owns the files of share ``i`` for the whole run and, each round, trains on the
next samples of those files (wrapping), never on another trainer's file. Every file is owned by
exactly one trainer, so there must be at least one file per trainer. A pure function of
(trainers, file list, window), so readers check receipts against the same ids.
"""

from __future__ import annotations

from collections.abc import Callable

from ...config import ConfigError
from ...data import TokenDataset
from ..bindings import samples_per_window
from ..runtime import Runtime
from .grants import trainers


def share_bounds(index: int, count: int, total: int) -> range:
    """The indices of share ``index`` of ``count`` contiguous shares of ``total`` items."""
    return range(index * total // count, (index + 1) * total // count)


def share_ids(share: range, window: int, n: int) -> list[int]:
    """``n`` ids of ``share`` for ``window``: the next slice of the share, wrapping."""
    if len(share) == 0:
        return []
    return [share[(window * n + j) % len(share)] for j in range(min(n, len(share)))]


def file_share(data: TokenDataset, index: int, count: int) -> list[str]:
    """The train files trainer ``index`` of ``count`` owns; ConfigError if it would own none."""
    files = data.files("train")
    if len(files) < count:
        raise ConfigError(
            f"the run's data prefix holds {len(files)} train files for {count} trainers; "
            "file shares need a file per trainer: add files (prepare_data.py --shard-tokens "
            "smaller) or set the template's workers lower"
        )
    bounds = share_bounds(index, count, len(files))
    return files[bounds.start : bounds.stop]


def share_samples(data: TokenDataset, index: int, count: int) -> range:
    """The sample ids that lie wholly within trainer ``index``'s files."""
    file_share(data, index, count)  # refuses a split with fewer files than trainers
    files = share_bounds(index, count, len(data.files("train")))
    return data.samples_in_files(files.start, files.stop)


def check_file_shares(rt: Runtime, data: TokenDataset) -> None:
    """At setup: ConfigError (one line) if the dataset cannot give every trainer a file."""
    members = trainers(rt)
    if members:
        file_share(data, 0, len(members))


def file_shares(rt: Runtime, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """Data rule: ``hotkey -> sample ids`` from its own files (empty for a non-trainer)."""
    members, n = trainers(rt), samples_per_window(rt)

    def ids(hotkey: str) -> list[int]:
        if hotkey not in members:
            return []
        return share_ids(share_samples(data, members.index(hotkey), len(members)), window, n)

    return ids
