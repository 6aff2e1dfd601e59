"""The run page's per-line section: each model line's merges, for a run that trains several
(two holders on two lanes, a line per sweep point): who holds it, the rounds it merged in as a
strip of cells (filled: merged), its held-out loss from its start to its newest version and the
tokens its merges took in. A run of one model line has no such section.
"""

from __future__ import annotations

from html import escape

from . import summary
from .load import Run
from .units import DASH, fmt_int, fmt_loss

# (label, numeric: right-aligned)
COLUMNS = (
    ("model line", False),
    ("held by", False),
    ("rounds merged", True),
    ("merged in round (filled: merged)", False),
    ("held-out loss, start → newest", True),
    ("tokens merged", True),
)


def panel(run: Run) -> str:
    """The per-line table, or nothing for a run of one model line."""
    rows = summary.line_rows(run)
    if not rows:
        return ""
    newest = max((w for r in rows for w in r.windows), default=-1)
    names = {hk: p.name for hk, p in run.participants.items()}
    cells = []
    for r in rows:
        strip = "".join(
            f'<i class="{"on" if w in r.windows else "off"}" title="round {w}"></i>'
            for w in range(newest + 1)
        )
        holders = ", ".join(names.get(hk, hk[:8]) for hk in r.holders) or DASH
        cells.append(
            [
                f"<code>{escape(r.lane)}</code>",
                escape(holders),
                f"{len(r.windows)} of {newest + 1}",
                f'<span class="strip">{strip}</span>',
                f"{fmt_loss(r.initial_loss)} → {fmt_loss(r.final_loss)}",
                fmt_int(r.tokens),
            ]
        )
    head = "".join(f'<th class="n">{h}</th>' if n else f"<th>{h}</th>" for h, n in COLUMNS)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{c}</td>' if n else f"<td>{c}</td>"
            for c, (_, n) in zip(row, COLUMNS, strict=True)
        )
        + "</tr>"
        for row in cells
    )
    return (
        '<section class="panel lines"><h2>Merges per model line</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )
