"""The checks' draw, simulated over many beacons (``subnet.verify.draw`` is a pure function):
how long a verified liar waits for its first check, with and without hotkeys that stay
newcomers, and how many windows probation takes to clear a network that starts at once.

Every check of an honest sender passes, and verifies it at the validator that made it (each
validator verifies on its own replays only); a late answerer's passes never come (it stays a
newcomer, the worst case for the others). Used by ``bench.py adversarial``'s record.
"""

from __future__ import annotations

import statistics

from subnet.neuron.checks import QUORUM
from subnet.verify.draw import places, targets


def _validators(count: int) -> list[str]:
    return [f"v{i}" for i in range(count)]


def first_check(
    verified: int,
    newcomers: int,
    validators: int = 2,
    checks: int = 1,
    share: float = 0.25,
    trials: int = 2000,
) -> float:
    """Mean windows until a given verified sender (one of ``verified``) is first checked, with
    ``newcomers`` that stay newcomers throughout."""
    vals = _validators(validators)
    liar = "m0"
    honest = {f"m{i}" for i in range(verified)}
    late = [f"n{i}" for i in range(newcomers)]
    uploads = sorted(honest) + late
    waits = []
    for trial in range(trials):
        window = 0
        named: dict[str, int] = {}
        while True:
            beacon = f"t{trial}w{window}"
            picked = {t for v in vals for t in targets(beacon, "r", "g", window, uploads, honest,
                                                       vals, v, checks, share, named)}  # fmt: skip
            named |= dict.fromkeys(picked, window)  # late answerers: named, never verified
            window += 1
            if liar in picked:
                break
        waits.append(window)
    return round(statistics.fmean(waits), 2)


def probation_clears(
    miners: int, validators: int = 2, checks: int = 1, share: float = 0.25, trials: int = 20
) -> dict:
    """Windows until ``miners`` honest newcomers (all starting at window 0) are verified: by
    one validator (merged from then on, at less than full weight) and by every validator (each
    by a pass of its own or by ``QUORUM`` passes of others, learnt the next window); the mean
    and the worst of ``trials``."""
    vals = _validators(validators)
    uploads = [f"m{i}" for i in range(miners)]
    first, every = [], []
    for trial in range(trials):
        own: dict[str, set[str]] = {v: set() for v in vals}
        verified: dict[str, set[str]] = {v: set() for v in vals}
        named: dict[str, dict[str, int]] = {v: {} for v in vals}
        window, some = 0, None
        while any(len(verified[v]) < miners for v in vals):
            beacon = f"p{trial}w{window}"
            for v in vals:
                for hk in targets(
                    beacon,
                    "r",
                    "g",
                    window,
                    uploads,
                    verified[v],
                    vals,
                    v,
                    checks,
                    share,
                    named[v],
                    QUORUM,
                ):
                    own[v].add(hk)  # passed: this validator pays it from the next window
                    named[v][hk] = window
            for v in vals:  # the others' passes, read from their notices
                others = [own[o] for o in vals if o != v]
                vouched = {hk for hk in uploads if sum(hk in o for o in others) >= QUORUM}
                verified[v] = own[v] | vouched
            window += 1
            if some is None and set().union(*verified.values()) == set(uploads):
                some = window
        first.append(some)
        every.append(window)
    k = places(miners, validators, checks, share)
    return {
        "places": k,
        "by_one_validator_mean": round(statistics.fmean(first), 1),
        "by_every_validator_mean": round(statistics.fmean(every), 1),
        "by_every_validator_max": max(every),
    }


def record(honest: int = 10, late: int = 8) -> dict:
    """The draw's figures for ``bench.py adversarial`` (2 validators, 1 check each, share 0.25)."""
    return {
        "windows_to_first_check": {
            "verified": honest,
            "without_late_answerers": first_check(honest, 0),
            f"with_{late}_late_answerers": first_check(honest, late),
            "n_over_k_without": round(honest / places(honest, 2, 1, 0.25), 2),
            "n_over_k_with": round((honest + late) / places(honest + late, 2, 1, 0.25), 2),
        },
        "probation_clear_windows": {str(n): probation_clears(n) for n in (16, 64)},
        # 8 validators in groups of QUORUM: each newcomer is checked by one group
        "probation_clear_windows_8_validators": {
            str(n): probation_clears(n, validators=8) for n in (16, 64)
        },
    }
