"""Which samples a miner trains on, and the receipt that proves which ones it used.

`assign_samples` is a pure function of (protocol seed, window, hotkey): a validator recomputes a
miner's assignment exactly, with nothing exchanged. The randomness is sha256 in counter mode, not
numpy or `random`, because those may change their algorithms between versions and every peer must
agree bit for bit forever. Assignments of different hotkeys are independent draws, so they overlap
only by chance (about n_samples² / n_total ids for two miners).

`random_sample_ids` is the validator's comparison set: drawn from fresh entropy it cannot know in
advance, excluding the miner's assigned ids.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence

_DOMAIN = b"beam/assign/1"
_RECEIPT_DOMAIN = b"beam/receipt/1"


def _uniform_below(key: bytes, counter: int, bound: int) -> int:
    """An integer in [0, bound) from sha256(key || counter); 256 bits make the modulo bias nil."""
    digest = hashlib.sha256(key + counter.to_bytes(8, "little")).digest()
    return int.from_bytes(digest, "little") % bound


def assign_samples(seed: int, window: int, hotkey: str, n_samples: int, n_total: int) -> list[int]:
    """`n_samples` distinct train sample ids in [0, n_total), in the order the miner trains them.

    A partial Fisher-Yates shuffle over a virtual range(n_total) (a dict holds the swapped
    entries), so the cost is O(n_samples) whatever the dataset size.

    Raises:
        ValueError: n_samples is negative or larger than n_total.
    """
    if not 0 <= n_samples <= n_total:
        raise ValueError(f"cannot assign {n_samples} distinct samples out of {n_total}")
    key = b"|".join([_DOMAIN, str(seed).encode(), str(window).encode(), hotkey.encode()])
    swapped: dict[int, int] = {}
    ids = []
    for i in range(n_samples):
        j = i + _uniform_below(key, i, n_total - i)
        ids.append(swapped.get(j, j))
        swapped[j] = swapped.get(i, i)
    return ids


def random_sample_ids(
    n_samples: int, n_total: int, *, exclude: Iterable[int] = (), seed: int | None = None
) -> list[int]:
    """`n_samples` distinct ids in [0, n_total) not in `exclude`, drawn unpredictably.

    `seed` is for tests; a validator leaves it None so miners cannot anticipate the set.

    Raises:
        ValueError: fewer than n_samples ids remain after exclusion.
    """
    excluded = set(exclude)
    available = n_total - len({i for i in excluded if 0 <= i < n_total})
    if not 0 <= n_samples <= available:
        raise ValueError(f"cannot draw {n_samples} samples: only {available} not excluded")
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    if n_samples > available // 2:
        # Dense request: shuffle the complement instead of rejection sampling.
        pool = [i for i in range(n_total) if i not in excluded]
        return rng.sample(pool, n_samples)
    chosen: dict[int, None] = {}
    while len(chosen) < n_samples:
        i = rng.randrange(n_total)
        if i not in excluded:
            chosen[i] = None
    return list(chosen)


def sample_receipt(sample_ids: Sequence[int]) -> str:
    """sha256 hex of the sample ids a miner trained on, in training order.

    Order is part of the receipt: the assignment fixes it, and a miner that reorders or drops
    samples produces a different receipt.
    """
    digest = hashlib.sha256(_RECEIPT_DOMAIN)
    digest.update(len(sample_ids).to_bytes(8, "little"))
    for i in sample_ids:
        if i < 0:
            raise ValueError(f"sample ids are non-negative, got {i}")
        digest.update(int(i).to_bytes(8, "little"))
    return digest.hexdigest()
