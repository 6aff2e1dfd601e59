"""A miner's track record: its gain on unseen data, window after window, against the median.

One window cannot tell a biased update from an honest one: honest uploads' gains on the same
random samples differ by up to +-30 % from the window's median (their senders trained on
different data), while a validator measures each one to about +-2 % (``bench`` measurements in
``docs/reliability.md``). A poisoner that trades part of its gain on data in general for harm
sits inside that spread in every single window, but below the median in nearly all of them;
an honest miner is above it as often as below. So the credit for unseen-data gain is also
judged on the mean ratio over the sender's last few measured windows, where the honest spread
has averaged out and a steady bias has not. Pure functions, known answers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set

# Entries are clipped to this range, evenly about 1: one lucky window may not pay for several
# biased ones, and one bad window (a ratio near 0, already unpaid by the per-window check, which
# pays nothing at half the median) may not cost the next seven windows' pay.
RATIO_RANGE = (0.7, 1.3)


def gain_ratio(r: float, reference: float | None) -> float | None:
    """``r / reference`` clipped to ``RATIO_RANGE``; None without a positive finite reference
    or a finite gain (nothing to judge by)."""
    if reference is None or not (math.isfinite(reference) and reference > 0.0):
        return None
    if not math.isfinite(r):
        return None
    low, high = RATIO_RANGE
    return min(high, max(low, r / reference))


def extend_records(
    records: Mapping[str, Sequence[float]],
    ratios: Mapping[str, float],
    keep: int,
    registered: Set[str],
) -> dict[str, list[float]]:
    """Each registered hotkey's record with this window's ratio appended, the last ``keep`` kept.

    A hotkey measured this window gains one entry; one not measured keeps its record as it was
    (a window it missed is already paid nothing). Hotkeys no longer registered are dropped, so a
    uid's next owner starts with no record. ``keep`` 0 keeps none.
    """
    out: dict[str, list[float]] = {}
    for hotkey in sorted(registered):
        values = [*records.get(hotkey, ()), *([ratios[hotkey]] if hotkey in ratios else [])]
        if keep > 0 and values:
            out[hotkey] = [float(v) for v in values[-keep:]]
    return out


def record_credit(values: Sequence[float], full: float, floor: float) -> float:
    """Credit factor in [0, 1] from a record's mean ratio: 1 at or above ``full``, 0 at or below
    ``floor``, linear between; 1 for an empty record (nothing measured yet to judge by)."""
    if not values:
        return 1.0
    mean = math.fsum(values) / len(values)
    if not math.isfinite(mean):
        return 0.0
    return min(1.0, max(0.0, (mean - floor) / (full - floor)))
