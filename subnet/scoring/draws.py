"""Which samples a validator measures an upload's harm on: the train split and the reported held-out set.

An upload's gain on random train samples shows harm to the data distribution, but only where
the validator looks. The run's progress is reported as the loss on a fixed, public set of
held-out samples (``REPORTED_HELDOUT``, the holder's ``heldout_batches(8, max_batches=4)``), so
that set is the first thing a poisoner that reads the code would target: ascent on 32 known
samples barely moves the loss of random train samples. The validator therefore also measures
every upload on a fresh, unpredictable draw from the reported set and holds it to the same
harm check (``window.window_score``).

Held-out samples share the sample-id space of the own and random sets by a negative encoding
(held-out sample ``j`` is id ``-(j + 1)``), so the per-sample probe and its cache need no change.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from subnet.data.dataset import Batch, TokenDataset

REPORTED_HELDOUT = 32  # samples of the held-out split the holder's reported loss is read on


def heldout_id(j: int) -> int:
    """The probe id of held-out sample ``j``."""
    return -(j + 1)


def split_of(sample_id: int) -> tuple[str, int]:
    """``(split, index in that split)`` of a probe id."""
    return ("heldout", -sample_id - 1) if sample_id < 0 else ("train", sample_id)


def heldout_draw(n: int, available: int, rng: random.Random | None = None) -> list[int]:
    """``n`` probe ids of the first ``min(available, REPORTED_HELDOUT)`` held-out samples.

    Drawn unpredictably (``rng`` for tests; a validator leaves it None), all of them when ``n``
    is at least that many; empty when ``n <= 0``.
    """
    pool = [heldout_id(j) for j in range(min(available, REPORTED_HELDOUT))]
    if n <= 0:
        return []
    if n >= len(pool):
        return pool
    return (rng or random.SystemRandom()).sample(pool, n)


def heldout_size(data: TokenDataset) -> int:
    """Samples in ``data``'s held-out split (0 for a dataset without one)."""
    try:
        return data.split_samples("heldout")
    except KeyError:
        return 0


def corpus_batches(data: TokenDataset, ids: Sequence[int], batch_size: int) -> Iterator[Batch]:
    """``ids`` (train ids and encoded held-out ids, mixed) in order, ``batch_size`` at a time."""
    for start in range(0, len(ids), batch_size):
        located = [split_of(i) for i in ids[start : start + batch_size]]
        rows = [data.sample(index, split) for split, index in located]
        tokens = torch.from_numpy(np.stack(rows).astype(np.int64))
        yield tokens[:, :-1], tokens[:, 1:]
