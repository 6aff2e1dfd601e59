"""A cheap screen of every upload: its cosine with what the window's other uploads sent.

Honest updates of one window share the gradient of one model, so each points, if only a
little, along the mean of the others; a poisoned one (a generic descent direction subtracted,
a flipped sign, a bias against the others) points away from it. A validator computes this for
every accepted upload, two decodes each and no forward pass (``subnet.scoring.sample`` then
evaluates the uploads that point against the others first), whether or not it evaluates them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from torch import Tensor

from subnet.training.aggregation import clip_scales

Delta = Mapping[str, Tensor]


def cosines(deltas: Mapping[str, Delta], norms: Mapping[str, float]) -> dict[str, float]:
    """``hotkey -> cosine`` of each upload with the mean of the others, all clipped to the
    window's median norm (as the holder merges them); ``deltas`` may decode on each access.
    0 for an upload of norm 0, or with nothing else to compare with."""
    names = sorted(deltas)
    if len(names) < 2:
        return dict.fromkeys(names, 0.0)
    scales = dict(zip(names, clip_scales([norms[n] for n in names]), strict=True))
    total: dict[str, Tensor] = {}
    for n in names:
        for k, t in deltas[n].items():
            part = t.float() * scales[n]
            total[k] = total[k].add_(part) if k in total else part
    t2 = math.fsum(float(t.double().pow(2).sum()) for t in total.values())
    out = {}
    for n in names:
        d = deltas[n]
        dot = math.fsum(float((d[k].double() * total[k].double()).sum()) for k in total)
        d2 = norms[n] ** 2
        s = scales[n]
        others2 = t2 - 2 * s * dot + s * s * d2  # |total - s d|^2
        if d2 <= 0 or others2 <= 0:
            out[n] = 0.0
            continue
        out[n] = (dot - s * d2) / math.sqrt(d2 * others2)
    return out


def against(cos: Mapping[str, float], threshold: float = 0.0) -> list[str]:
    """The uploads pointing against the others (cosine below ``threshold``), most first."""
    return sorted((n for n, c in cos.items() if c < threshold), key=lambda n: (cos[n], n))
