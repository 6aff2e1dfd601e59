"""The run page's pay section: why each miner earned what it earned, from its score's parts.

A validator's window score is ``proven excess x credit x fraction`` (``subnet.scoring.window``):
the own-data excess gain (how much more the upload helped the miner's own samples than random
ones, beyond the window's reference update) less ``proof_z`` standard errors, times the credit
left after the harm and track-record checks, times the share of the window's steps trained. A
lone upload (the only one evaluated) is paid ``min(a, r)`` instead. Miners' shares of the merge
and of the weights follow their (moving) scores. Every figure here is one the validators logged
with the score (``measured`` in their ``scores`` records); nothing is recomputed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from html import escape

from .load import Run, Scores
from .units import DASH, fmt_share

PROOF_Z = 2.0  # scoring.proof_z's default, when the run's protocol does not say


@dataclass(frozen=True)
class PayRow:
    """One miner's latest scored window, as its validators saw it (medians over them)."""

    name: str
    window: int
    verdict: str  # "scored", "scored (alone)", "late" ...
    assigned: float | None  # relative loss drop on its own samples (a)
    random: float | None  # ... on random samples (r)
    excess: float | None  # own-data excess over the reference
    se: float | None
    proven: float | None  # max(0, excess - z se)
    fraction: float | None
    score: float  # the median of the validators' window scores
    moving: float | None  # the median of their moving scores
    share: float | None  # its weight in that window's merge (None: the window did not merge)


def pay_rows(run: Run) -> list[PayRow]:
    """Each miner's latest window that a validator scored, newest validators' view."""
    z = float((run.protocol.get("scoring") or {}).get("proof_z", PROOF_Z))
    merges = {v.window: v for v in run.versions if v.version >= 1}
    by_miner: dict[str, list[Scores]] = {}
    for s in run.scores:
        for hotkey in s.verdicts:
            by_miner.setdefault(hotkey, []).append(s)
    rows = []
    for hotkey, records in by_miner.items():
        window = max(s.window for s in records)
        latest = [s for s in records if s.window == window]
        reasons = sorted({s.verdicts[hotkey][0] for s in latest})
        details = sorted({s.details.get(hotkey, "") for s in latest} - {""})
        verdict = ", ".join(reasons) + (f" ({', '.join(details)})" if details else "")
        part = _parts([s.measured.get(hotkey, {}) for s in latest])
        excess, se = part.get("specific"), part.get("se")
        proven = max(0.0, excess - z * se) if excess is not None and se is not None else None
        moving = [s.moving[hotkey] for s in latest if hotkey in s.moving]
        share = merges[window].contributors.get(hotkey, 0.0) if window in merges else None
        name = run.participants[hotkey].name if hotkey in run.participants else hotkey[:8]
        rows.append(
            PayRow(
                name,
                window,
                verdict,
                part.get("assigned"),
                part.get("random"),
                excess,
                se,
                proven,
                part.get("fraction"),
                statistics.median(s.verdicts[hotkey][1] for s in latest),
                statistics.median(moving) if moving else None,
                share,
            )
        )
    return sorted(rows, key=lambda r: (-r.score, r.name))


def _parts(measures: list[dict[str, float]]) -> dict[str, float]:
    """The median of each measure over the validators that logged it."""
    keys = {k for m in measures for k in m}
    return {k: statistics.median(m[k] for m in measures if k in m) for k in keys}


def _num(x: float | None, digits: int = 4) -> str:
    return DASH if x is None else f"{x:.{digits}f}"


def panel(run: Run, room: bool = False) -> str:
    """The pay table, or nothing for a run without validators' scores; in a ``room`` (no chain,
    nobody is paid) it is titled for the scores and says nothing of a chain's weights."""
    rows = pay_rows(run)
    if not rows:
        return ""
    head = (
        "miner",
        "window",
        "verdict",
        "a: own-data gain",
        "r: random-data gain",
        "excess &plusmn; SE",
        "proven",
        "fraction",
        "score",
        "moving score",
        "merge weight (that window)",
    )
    cells = [_cells(r) for r in rows]
    th = "".join(
        f"<th>{h}</th>" if i < 3 else f'<th class="n">{h}</th>' for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="w">{c}</td>'
            if i == 2
            else f"<td>{c}</td>"
            if i < 3
            else f'<td class="n">{c}</td>'
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in cells
    )
    note = (
        "A window's score is the proven excess (the own-data excess less "
        f"{PROOF_Z:g} standard errors: what the upload helped its own samples beyond "
        "random ones and the others' updates) times the credit the harm and track-record "
        "checks leave (score / proven when below 1) times the fraction of steps trained; "
        "the only upload of a window (alone) is paid min(a, r). Medians over the "
        "validators. The moving score (weights on chain) and the merge weight follow the "
        "scores; see docs/validator.md."
    )
    title = "Why each miner earned what it did"
    if room:
        note = note.replace(" (weights on chain)", "")
        title = "Why each miner scored what it did (a room pays no one)"
    return (
        f'<section class="panel"><h2>{escape(title)}</h2><table><thead>'
        f'<tr>{th}</tr></thead><tbody>{body}</tbody></table><p class="meta">{escape(note)}'
        "</p></section>"
    )


def _cells(r: PayRow) -> list[str]:
    """One miner-window's row of the pay table, as cell markup."""
    return [
        f'<span class="who">{escape(r.name)}</span>',
        str(r.window),
        escape(r.verdict),
        _num(r.assigned),
        _num(r.random),
        DASH if r.excess is None else f"{r.excess:.4f} &plusmn; {_num(r.se)}",
        _num(r.proven),
        _num(r.fraction, 2),
        _num(r.score),
        _num(r.moving),
        fmt_share(r.share) if r.share is not None else "not merged",
    ]
