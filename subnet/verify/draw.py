"""What a window's beacon decides: which chunks a check reads, and whom each validator checks.

The beacon is a value nobody knew while commits could still be written (the chain's drand
pulse of the first round out after the guard tick that follows the upload deadline), so a miner cannot train honestly on exactly the
chunks that will be read, nor know at commit time whether its upload will be checked.

**Chunks.** Half of the draws pick a tensor uniformly and then one of its chunks, half pick a
chunk uniformly over the model: a lie confined to one small tensor (a norm's gain) is met about
as often as a lie spread over the embedding.

**Targets.** Each validator checks ``checks`` uploads a window, from its own view of the
committed senders: **verified** ones (a check of its own passed them, or the passes of two
other validators: ``subnet.neuron.checks.QUORUM``) and **newcomers** (their probation here). Each check goes to one group or the other by a fair coin of the beacon's and the
validator's (a group that is empty gives its turn to the other).

- The verified group is shuffled by the beacon, the same shuffle at every validator, and
  validator ``i`` (in sorted hotkey order) takes place ``i x checks + j`` of the window's first
  ``K = min(N, V x checks, ceil(N x share))`` places: validators check different verified
  senders, so the share checked grows with their number, while what miners send stays bounded.
  Nothing a verified sender does tells it whether it is checked next.
- Newcomers queue: those the validator never named first, then by the last window it named
  them, the beacon breaking ties (the same order at every validator that named the same ones,
  so validators tend to check a newcomer in the same window). A newcomer whose check is owed
  (it answers late) goes behind every one not named yet, so no set of hotkeys holds the front.
  (A newcomer may know its probation check is coming: it is paid nothing here until one
  passes, and from then on it is drawn with the verified.) With ``quorum`` (the passes of
  other validators that verify a sender, ``QUORUM``), validators go in groups of that many, in
  sorted hotkey order, and group ``g`` starts at place ``g x checks`` of the queue (wrapping):
  each newcomer is checked by one group, whose passes verify it at every other validator, so
  ``V / quorum`` newcomers are verified a window instead of one, and a lone newcomer is still
  checked by every group at once.

So each window a verified sender is checked with probability ``K / W`` with no newcomers and
``K / 2W`` with any (validators that verified the same senders), whatever any number of
newcomers does: a verified liar's first check comes after ``W / K`` windows on average, at
most ``2 W / K``. A newcomer at the head of a validator's queue is checked there within 2
windows on average; a network whose ``N`` senders start together is verified by every
validator in about ``2 N x quorum / (V x checks)`` windows (``2 N / checks`` with 2 validators,
where no other validator's passes can make a quorum).
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
    quorum: int = 0,
) -> list[str]:
    """The uploads validator ``me`` checks in ``window`` (the module doc), from its own view:
    ``verified``, the senders it holds verified; ``named``, the last window it named each
    newcomer in (none: never); ``quorum``, the passes of others that verify a sender (0: every
    validator starts at the head of its newcomer queue)."""
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
    # Each check goes to the verified group or to the newcomers by a fair coin of the beacon's
    # and this validator's (to the one that is not empty, when one is): no number of newcomers
    # thins the checks of the verified below half, and a newcomer is not left waiting for its
    # share of a large network. Among the verified it takes this validator's place of one
    # shuffle every validator shares, so validators that verified the same senders check
    # different ones; newcomers it takes from the head of its own queue.
    p_old = 0.5 if old and new else float(bool(old))
    coins = _stream("split", beacon, run, lane, str(int(window)), me)
    i = sorted(validators).index(me)
    queue, out = list(new), []
    start = (i // quorum) * checks if quorum > 0 else 0  # this validator's group's place
    for j in range(checks):
        coin = next(coins) / 2**64
        if old and (not queue or coin < p_old):
            out.append(old[(i * checks + j) % k % len(old)])
        elif queue:
            out.append(queue.pop(start % len(queue)))
    return list(dict.fromkeys(out))
