"""The checks' draw, simulated over many beacons (``subnet.verify.draw`` is a pure function):
how long a verified liar waits for its first check, with and without hotkeys that stay
newcomers, and how many windows probation takes to clear a network that starts at once.

Every check of an honest sender passes and is shared by the next window (validators read each
other's notices after their reports); a late answerer's passes never come (it stays a
newcomer, the worst case for the others). Used by ``bench.py adversarial``'s record.
"""

from __future__ import annotations

import statistics

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
    miners: int, validators: int = 2, checks: int = 1, share: float = 0.25, trials: int = 50
) -> dict:
    """Windows until every one of ``miners`` honest newcomers (all starting at window 0) has
    passed a check: the mean and the worst over ``trials`` beacon sequences."""
    vals = _validators(validators)
    uploads = [f"m{i}" for i in range(miners)]
    took = []
    for trial in range(trials):
        verified: set[str] = set()
        named: dict[str, int] = {}
        window = 0
        while len(verified) < miners:
            beacon = f"p{trial}w{window}"
            picked = {t for v in vals for t in targets(beacon, "r", "g", window, uploads,
                                                       verified, vals, v, checks, share, named)}  # fmt: skip
            verified |= picked  # passed, and known to every validator by the next window
            named |= dict.fromkeys(picked, window)
            window += 1
        took.append(window)
    k = places(miners, validators, checks, share)
    return {"places": k, "mean": round(statistics.fmean(took), 1), "max": max(took)}


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
    }
