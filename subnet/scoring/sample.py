"""Which uploads a validator evaluates in a window: a bounded sample, unknown to miners.

Evaluating an upload (its losses before and after, on its own and on random samples) costs
about a third of a miner-window on ``hypertrain-20m`` at the protocol's ``eval_samples``, so a
validator that evaluated every upload would cost ``0.36 N`` miner-windows a window. Each
validator evaluates at most ``scoring.evaluations`` uploads instead (0: every one), and keeps
every miner's standing between its evaluations (``subnet.scoring.weights.update_moving``).

The sample is a shuffle of the window's accepted uploads by the window's beacon (the drand
pulse after the guard tick: nobody knew it while commits could be written), the same at every
validator, and validator ``i`` (in sorted hotkey order) takes places ``i x B`` to ``i x B + B -
1``: validators evaluate different uploads, so ``V x B`` a window are evaluated, by somebody,
until that covers them all. Without a beacon (rooms; a chain that did not answer) the
validator draws from its own secret randomness, which miners cannot know either.

Uploads a copy fingerprint matched are evaluated on top (both sides: who copied whom is decided
by the own-data evidence, ``subnet.scoring.copies``), up to another ``B``; a matched upload left
over is **held**: paid nothing and merged by nobody this window, its standing unchanged.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence

_DOMAIN = b"beam-score-v1\x00"


def _rank(beacon: str, run: str, lane: str, window: int, hotkey: str) -> bytes:
    fields = "\x00".join((beacon, run, lane, str(int(window)), hotkey)).encode()
    return hashlib.sha256(_DOMAIN + fields).digest()


def evaluated(
    beacon: str | None,
    run: str,
    lane: str,
    window: int,
    uploads: Iterable[str],
    validators: Sequence[str],
    me: str,
    budget: int,
) -> set[str]:
    """The uploads validator ``me`` evaluates in ``window`` (the module doc); ``budget`` 0 or
    at least the number of uploads: every one."""
    uploads = sorted(set(uploads))
    if budget <= 0 or budget >= len(uploads):
        return set(uploads)
    if beacon is None or me not in validators:
        return set(random.SystemRandom().sample(uploads, budget))
    order = sorted(uploads, key=lambda hk: (_rank(beacon, run, lane, window, hk), hk))
    start = sorted(validators).index(me) * budget
    return {order[(start + j) % len(order)] for j in range(budget)}


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
