"""The run page: read a run folder, compute its figures, render self-contained HTML, serve it.

``load_run`` -> :class:`Run`; ``summary.headline / roster / round_rows / loss_curve`` compute the
figures; ``render_page`` writes the HTML; ``make_server`` serves it live on loopback.
"""

from .html import render_page
from .load import Run, load_run, metrics_files
from .serve import RunPageServer, make_server
from .summary import Headline, RosterRow, RoundRow, headline, loss_curve, roster, round_rows

__all__ = [
    "Headline",
    "RosterRow",
    "RoundRow",
    "Run",
    "RunPageServer",
    "headline",
    "load_run",
    "loss_curve",
    "make_server",
    "metrics_files",
    "render_page",
    "round_rows",
    "roster",
]
