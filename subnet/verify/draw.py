"""What a window's beacon decides: which chunks a check reads, and whom each validator checks.

The beacon is a value nobody knew while commits could still be written (the chain's drand
pulse of the first round out after the guard tick that follows the upload deadline), so a miner cannot train honestly on exactly the
chunks that will be read, nor know at commit time whether its upload will be checked.

**Chunks.** Half of the draws pick a tensor uniformly and then one of its chunks, half pick a
chunk uniformly over the model: a lie confined to one small tensor (a norm's gain) is met about
as often as a lie spread over the embedding.

**Targets.** Each validator checks ``checks`` uploads a window, chosen from the window's uploads
in one order every validator can compute: uploads whose sender is not yet verified first (its
first checks are its probation), then the rest, each group shuffled by the beacon. Validator
``i`` (in sorted hotkey order) takes the ``i``-th place: validators check different senders, so
the share of uploads checked grows with the number of validators, not the cost of any one. At
most ``ceil(share * uploads)`` places are used (what miners send for checks stays a bounded
multiple of their uploads); validators beyond them check the same places again.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence

from subnet.verify.chunks import ChunkMap, sample_size

_DOMAIN = b"beam-check-v1\x00"


def _stream(*fields: str) -> Iterable[int]:
    """An endless stream of 64-bit numbers from the fields (sha256 in counter mode)."""
    seed = hashlib.sha256(_DOMAIN + "\x00".join(fields).encode()).digest()
    counter = 0
    while True:
        block = hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        for i in range(0, 32, 8):
            yield int.from_bytes(block[i : i + 8], "big")
        counter += 1


def rank(beacon: str, run: str, lane: str, window: int, hotkey: str) -> float:
    """A uniform number in ``[0, 1)`` from the beacon and an upload's identity."""
    return next(iter(_stream("rank", beacon, run, lane, str(int(window)), hotkey))) / 2**64


def chunk_sample(
    beacon: str, run: str, lane: str, window: int, hotkey: str, chunks: ChunkMap, share: float
) -> list[int]:
    """The chunks a check of ``hotkey``'s upload of ``window`` reads, ascending, no repeats."""
    n, want = chunks.n, sample_size(chunks.n, share)
    names = sorted({r[0] for r in chunks.refs})
    by_name: dict[str, list[int]] = {}
    for i, (name, _, _) in enumerate(chunks.refs):
        by_name.setdefault(name, []).append(i)
    picked: set[int] = set()
    numbers = _stream("chunks", beacon, run, lane, str(int(window)), hotkey)
    while len(picked) < want:
        if next(numbers) % 2 == 0:
            group = by_name[names[next(numbers) % len(names)]]
            picked.add(group[next(numbers) % len(group)])
        else:
            picked.add(next(numbers) % n)
    return sorted(picked)


def places(uploads: int, validators: int, checks: int, share: float) -> int:
    """How many distinct uploads a window's checks cover at most."""
    if uploads <= 0 or validators <= 0 or checks <= 0:
        return 0
    return max(1, min(uploads, validators * checks, math.ceil(uploads * share)))


def targets(
    beacon: str,
    run: str,
    lane: str,
    window: int,
    uploads: Sequence[str],
    verified: set[str],
    validators: Sequence[str],
    me: str,
    checks: int,
    share: float,
) -> list[str]:
    """The uploads validator ``me`` checks in ``window`` (see the module doc)."""
    if me not in validators:
        return []
    order = sorted(
        uploads, key=lambda hk: (hk in verified, rank(beacon, run, lane, window, hk), hk)
    )
    k = places(len(order), len(validators), checks, share)
    if k == 0:
        return []
    i = sorted(validators).index(me)
    return list(dict.fromkeys(order[(i * checks + j) % k] for j in range(checks)))
