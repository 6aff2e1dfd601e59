"""What a window's beacon decides: which chunks a check reads, and whom each validator checks.

The beacon is a value nobody knew while commits could still be written (the chain's drand
pulse of the first round out after the guard tick that follows the upload deadline), so a miner cannot train honestly on exactly the
chunks that will be read, nor know at commit time whether its upload will be checked.

**Chunks.** Half of the draws pick a tensor uniformly and then one of its chunks, half pick a
chunk uniformly over the model: a lie confined to one small tensor (a norm's gain) is met about
as often as a lie spread over the embedding.

**Targets.** A window has ``K = min(N, V x checks, ceil(share x N))`` places (``places``):
validators check different uploads, so the share checked grows with their number, while what
miners send stays bounded. The places are split between two groups of the committed senders,
so that neither can starve the other: **verified** senders (a check of them has passed) get
``K_v = K x max(W / N, 1/2)`` places (``W`` of the ``N`` senders are verified; rounded up or
down by the beacon so the mean is exact), **newcomers** (their first checks are their
probation) the rest; a group with fewer members than its places gives the rest to the other.
The verified group is shuffled by the beacon and its first places taken: nothing a verified
sender does tells it whether it is checked next. Newcomers queue: those no notice named yet
first, then by the last window a notice named them, the beacon breaking ties; so a newcomer
whose check is still owed (it answers late) goes behind every one not named yet, and no set
of newcomers holds the front. (A newcomer may know its probation check is coming: it is paid
nothing until one passes, and from then on it is drawn with the verified.) Validator ``i`` (in sorted hotkey
order) takes places ``i x checks`` to ``i x checks + checks - 1``; validators beyond ``K``
check the same places again.

So each window a verified sender is checked with probability ``K_v / W >= max(K / N, K / 2W)``,
whatever any number of newcomers does: a verified liar's first check comes after at most
``min(N / K, 2 W / K)`` windows on average, newcomers counted in ``N`` or not. A newcomer is
checked with probability ``(K - K_v) / U`` (``U`` newcomers): ``K / N`` while newcomers are
fewer than the verified, so probation lasts ``N / K`` windows on average; a network whose
``N`` senders start together clears in about ``2 N / K`` windows (once some are verified, half
the places check them again: a miner that turns once verified is checked from the start).
At most ``ceil(N x share)`` distinct uploads a window are checked, so what miners send for
checks stays a bounded multiple of their uploads.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence, Set

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
    verified: Set[str],
    validators: Sequence[str],
    me: str,
    checks: int,
    share: float,
    named: Mapping[str, int] | None = None,
) -> list[str]:
    """The uploads validator ``me`` checks in ``window`` (see the module doc); ``named``: the
    last window a notice named each sender in (none: never)."""
    if me not in validators:
        return []
    order = ordered(
        beacon, run, lane, window, uploads, verified, len(validators), checks, share, named
    )
    if not order:
        return []
    i = sorted(validators).index(me)
    return list(dict.fromkeys(order[(i * checks + j) % len(order)] for j in range(checks)))


def ordered(
    beacon: str,
    run: str,
    lane: str,
    window: int,
    uploads: Sequence[str],
    verified: Set[str],
    validators: int,
    checks: int,
    share: float,
    named: Mapping[str, int] | None = None,
) -> list[str]:
    """The window's ``K`` places in order: newcomers' and verified senders' (module doc)."""
    k = places(len(uploads), validators, checks, share)
    if k == 0:
        return []
    named = named or {}

    def shuffled(group: list[str], first: Mapping[str, int]) -> list[str]:
        key = lambda hk: (first.get(hk, -1), rank(beacon, run, lane, window, hk), hk)  # noqa: E731
        return sorted(group, key=key)

    new = shuffled([hk for hk in set(uploads) if hk not in verified], named)
    old = shuffled([hk for hk in set(uploads) if hk in verified], {})
    # The verified group's places: its share of the senders, and at least half (so no number
    # of newcomers thins its checks), rounded up or down by the beacon to keep the mean.
    want = k * max(len(old) / (len(old) + len(new)), 0.5) if old and new else k * bool(old)
    coin = next(iter(_stream("split", beacon, run, lane, str(int(window))))) / 2**64
    k_old = min(len(old), math.floor(want) + (coin < want - math.floor(want)))
    k_new = min(len(new), k - k_old)
    k_old = min(len(old), k - k_new)  # newcomers too few: the places go back
    return new[:k_new] + old[:k_old]
