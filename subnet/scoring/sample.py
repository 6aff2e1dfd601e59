"""Which uploads a validator evaluates in a window: a bounded sample, unknown to miners.

Evaluating an upload (its losses before and after, on its own and on random samples) costs
about a third of a miner-window on ``hypertrain-20m`` at the protocol's ``eval_samples``, so a
validator that evaluated every upload would cost ``0.36 N`` miner-windows a window. Each
validator evaluates at most ``scoring.evaluations`` uploads instead (0: every one), and keeps
every miner's standing between its evaluations (``subnet.scoring.weights.update_moving``).

Only uploads this validator may pay are evaluated (its verified senders: a newcomer on
probation is scored 0 whatever it sends, so evaluating it buys nothing). Of those, each of the
``B`` evaluations goes by a fair coin either to the **fresh** (no standing here yet: the head of
a queue in one beacon order, so a sender just verified is evaluated within about 2 windows and
paid its share from then on) or to the **established**, shuffled by the window's beacon (the
drand pulse after the guard tick: nobody knew it while commits could be written), the same at
every validator, validator ``i`` (in sorted hotkey order) taking places ``i x B`` to ``i x B +
B - 1``: validators evaluate different uploads, ``V x B / 2`` or more a window, so an
established sender is re-evaluated every ``2 N / (V B)`` windows at most, whatever newcomers
do. Without a beacon (rooms; a chain that did not answer) the validator draws from its own
secret randomness, which miners cannot know either.

Before the draw, a screen of every upload (``subnet.scoring.consensus``: its cosine with the
mean of the others, no forward pass) names the uploads that point against the others; those the
validator may pay take up to half the evaluations, most suspect first: a verified sender that
turns to a poison pointing away from the others is evaluated in the window it does, whether or
not the draw would have come to it. Honest updates of one window share a gradient and point
along the others' mean; one that does not is only evaluated (nothing is held on a cosine).

Uploads a copy fingerprint matched are evaluated on top (both sides: who copied whom is decided
by the own-data evidence, ``subnet.scoring.copies``), up to another ``B``; a matched upload left
over is **held**: paid nothing and merged by nobody this window, its standing unchanged.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence

_DOMAIN = b"beam-score-v1\x00"


def _stream(*fields: str):
    seed = hashlib.sha256(_DOMAIN + "\x00".join(fields).encode()).digest()
    counter = 0
    while True:
        yield int.from_bytes(hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()[:8], "big")
        counter += 1


def evaluated(
    beacon: str | None,
    run: str,
    lane: str,
    window: int,
    eligible: Iterable[str],
    fresh: Iterable[str],
    validators: Sequence[str],
    me: str,
    budget: int,
    suspects: Sequence[str] = (),
) -> set[str]:
    """The uploads validator ``me`` evaluates in ``window`` (the module doc): ``eligible``, the
    uploads it may pay; ``fresh``, those with no standing here yet; ``suspects``, those a
    screen found pointing against the others, most first (``consensus.against``): the first
    ``ceil(budget / 2)`` of them eligible come first. ``budget`` 0, or at least the eligible
    count: every one."""
    eligible = sorted(set(eligible))
    if budget <= 0 or budget >= len(eligible):
        return set(eligible)
    first = [hk for hk in suspects if hk in set(eligible)][: (budget + 1) // 2]
    eligible = [hk for hk in eligible if hk not in first]
    budget -= len(first)
    fresh = set(fresh)
    if beacon is None or me not in validators:
        secret = random.SystemRandom()
        beacon, me, validators = f"{secret.getrandbits(128):x}", "", [""]

    def rank(hk: str) -> tuple[int, str]:
        return next(_stream("rank", beacon, run, lane, str(int(window)), hk)), hk

    new = sorted((hk for hk in eligible if hk in fresh), key=rank)
    old = sorted((hk for hk in eligible if hk not in fresh), key=rank)
    coins = _stream("split", beacon, run, lane, str(int(window)), me)
    start = sorted(validators).index(me) * budget
    out: list[str] = []
    for j in range(budget):
        if new and (not old or next(coins) % 2):
            out.append(new.pop(0))
        else:
            out.append(old[(start + j) % len(old)])
    return set(out) | set(first)


def with_matched(
    sample: set[str], matched: Sequence[tuple[str, str]], budget: int
) -> tuple[set[str], set[str]]:
    """``(evaluated, held)``: the sample plus both sides of each fingerprint match of this
    window (``matched``: pairs of hotkeys, in the order found), up to ``budget`` more uploads
    (0: no limit); the matched uploads beyond it are held."""
    out, extra, held = set(sample), 0, set()
    for pair in matched:
        new = [hk for hk in pair if hk not in out]
        if budget <= 0 or extra + len(new) <= budget:
            out.update(new)
            extra += len(new)
        else:
            held.update(hk for hk in pair if hk not in out)
    return out, held
