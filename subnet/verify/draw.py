"""What a window's beacon decides: which chunks a check reads, and whom each validator checks.

The beacon is a value nobody knew while commits could still be written (the chain's drand
pulse of the first round out after the guard tick that follows the upload deadline), so a miner cannot train honestly on exactly the
chunks that will be read, nor know at commit time whether its upload will be checked.

**Chunks.** Half of the draws pick a tensor uniformly and then one of its chunks, half pick a
chunk uniformly over the model: a lie confined to one small tensor (a norm's gain) is met about
as often as a lie spread over the embedding.

**Targets.** Each validator checks ``checks`` uploads a window, from its own view of the
committed senders: **verified** ones (its own checks of them passed: only a validator's own
replay verifies a sender there) and **newcomers** (their first check here is their probation
here). Each check goes to the verified group with probability ``max(W / N, 1/2)`` (``W`` of
the ``N`` senders verified here; a coin of the beacon's and the validator's), else to the next
newcomer of the validator's queue; a group that is empty gives its turn to the other.

- The verified group is shuffled by the beacon, the same shuffle at every validator, and
  validator ``i`` (in sorted hotkey order) takes place ``i x checks + j`` of the window's first
  ``K = min(N, V x checks, ceil(N x share))`` places: validators check different verified
  senders, so the share checked grows with their number, while what miners send stays bounded.
  Nothing a verified sender does tells it whether it is checked next.
- Newcomers queue: those the validator never named first, then by the last window it named
  them, the beacon breaking ties; validator ``i`` starts at place ``i x checks`` of its queue,
  so validators that named the same check different newcomers at once. A newcomer whose check is owed (it answers late) goes behind
  every one not named yet, so no set of hotkeys holds the front. (A newcomer may know its
  probation check is coming: it is paid nothing here until one passes, and from then on it is
  drawn with the verified.)

So each window a verified sender is checked with probability ``K x max(W / N, 1/2) / W``
(validators verified the same senders), whatever any number of newcomers does: a verified
liar's first check comes after at most ``min(N / K, 2 W / K)`` windows on average, newcomers
counted in ``N`` or not. A newcomer waits about ``N / K`` windows at each validator while
newcomers are fewer than the verified; every validator checks every newcomer once.
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
    """The uploads validator ``me`` checks in ``window`` (the module doc), from its own view:
    ``verified``, the senders its own checks passed; ``named``, the last window it named each
    newcomer in (none: never)."""
    if me not in validators:
        return []
    k = places(len(uploads), len(validators), checks, share)
    if k == 0:
        return []
    named = named or {}
    new = sorted(
        (hk for hk in set(uploads) if hk not in verified),
        key=lambda hk: (named.get(hk, -1), rank(beacon, run, lane, window, hk), hk),
    )
    old = sorted(
        (hk for hk in set(uploads) if hk in verified),
        key=lambda hk: (rank(beacon, run, lane, window, hk), hk),
    )
    # Each check goes to the verified group with probability max(W / N, 1/2) (its share of the
    # senders, and at least half, so no number of newcomers thins its checks), by a coin of the
    # beacon's and this validator's; there it takes this validator's place of one shuffle every
    # validator shares, so validators that verified the same senders check different ones.
    p_old = max(len(old) / (len(old) + len(new)), 0.5) if old and new else float(bool(old))
    coins = _stream("split", beacon, run, lane, str(int(window)), me)
    i = sorted(validators).index(me)
    # Validators start their queues at their own places too: at once they check different
    # newcomers (each checks every one in time)
    off = (i * checks) % k % len(new) if new else 0
    queue, out = new[off:] + new[:off], []
    for j in range(checks):
        coin = next(coins) / 2**64
        if old and (not queue or coin < p_old):
            out.append(old[(i * checks + j) % k % len(old)])
        elif queue:
            out.append(queue.pop(0))
    return list(dict.fromkeys(out))
