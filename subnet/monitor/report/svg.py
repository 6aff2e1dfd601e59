"""A dependency-free SVG line chart: axes, "nice" ticks, one marker per point, a title.

The markup is meant to be inlined in an HTML page (so it carries no ``xmlns`` URL); colours come
from CSS classes the page defines, with plain fallbacks so it also reads on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 x 10^k) covering ``[lo, hi]``."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = [round(first, 10)]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(first + len(ticks) * step, 10))
    return ticks


def _label(value: float) -> str:
    """A tick label without float noise: ``2``, ``0.5``, ``7.25``."""
    return f"{value:.6g}"


def line_chart(
    points: list[tuple[float, float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    reference: tuple[str, float] | None = None,
    width: int = 1100,
    height: int = 360,
) -> str:
    """An ``<svg>`` line chart of ``points`` (x ascending); ``reference`` adds a dashed level line.

    Each point is one ``<circle class="pt">`` with a ``<title>`` tooltip, so a reader (or a test)
    can count them. With no points the chart says so instead of drawing axes.
    """
    left, right, top, bottom = 64, 20, 40, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{escape(title)}" font-family="inherit">',
        f'<text class="chart-title" x="{left}" y="22" font-size="15" font-weight="600" '
        f'fill="#1f2937">{escape(title)}</text>',
    ]
    if not points:
        parts.append(
            f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle" '
            f'fill="#6b7280">No rounds yet</text></svg>'
        )
        return "".join(parts)
    xs = [x for x, _ in points]
    ys = [y for _, y in points] + ([reference[1]] if reference else [])
    x_ticks = _x_ticks(min(xs), max(xs))
    y_ticks = nice_ticks(min(ys), max(ys))
    x0, x1 = x_ticks[0], x_ticks[-1]
    y0, y1 = y_ticks[0], y_ticks[-1]

    def sx(x: float) -> float:
        inset = 14  # keep the first and last markers off the axes
        return left + inset + (x - x0) / ((x1 - x0) or 1) * (plot_w - 2 * inset)

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    parts += _grid(y_ticks, x_ticks, sx, sy, left, top, plot_w, plot_h)
    if reference:
        parts.append(_reference(reference, sy, left, plot_w))
    parts += _series(points, sx, sy, x_label)
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle" '
        f'font-size="12" fill="#6b7280">{escape(x_label)}</text>'
        f'<text class="axis-label" transform="translate(16 {top + plot_h / 2}) rotate(-90)" '
        f'text-anchor="middle" font-size="12" fill="#6b7280">{escape(y_label)}</text></svg>'
    )
    return "".join(parts)


def _reference(
    reference: tuple[str, float], sy: Callable[[float], float], left: float, plot_w: float
) -> str:
    """The dashed level line across the plot, labelled with its name and value."""
    name, level = reference
    return (
        f'<line class="ref" x1="{left}" x2="{left + plot_w}" y1="{sy(level):.1f}" '
        f'y2="{sy(level):.1f}" stroke="#9ca3af" stroke-dasharray="5 4"/>'
        f'<text class="ref-label" x="{left + plot_w - 4}" y="{sy(level) - 6:.1f}" '
        f'text-anchor="end" font-size="11" fill="#6b7280">{escape(name)} '
        f"{_label(level)}</text>"
    )


def _series(
    points: list[tuple[float, float]],
    sx: Callable[[float], float],
    sy: Callable[[float], float],
    x_label: str,
) -> list[str]:
    """The line through ``points`` and one tooltipped marker per point."""
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    out = [
        f'<polyline class="line" points="{path}" fill="none" stroke="#4f46e5" '
        f'stroke-width="2.5" stroke-linejoin="round"/>'
    ]
    radius = 4 if len(points) <= 60 else 2
    for x, y in points:
        out.append(
            f'<circle class="pt" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="{radius}" fill="#4f46e5" '
            f'stroke="#fff" stroke-width="1.5"><title>{escape(x_label)} {_label(x)}: '
            f"{_label(y)}</title></circle>"
        )
    return out


def _x_ticks(lo: float, hi: float) -> list[float]:
    """Integer ticks for round numbers; a single round gets a one-step span around it."""
    if hi == lo:
        return [lo - 1, lo, lo + 1]
    ticks = nice_ticks(lo, hi, count=min(int(hi - lo) + 1, 8))
    return ticks if all(t == int(t) for t in ticks) else nice_ticks(lo, hi)


def _grid(
    y_ticks: list[float],
    x_ticks: list[float],
    sx: Callable[[float], float],
    sy: Callable[[float], float],
    left: float,
    top: float,
    plot_w: float,
    plot_h: float,
) -> list[str]:
    """Horizontal grid lines with y labels, x tick labels, and the two axes."""
    out = []
    for y in y_ticks:
        out.append(
            f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
            f'stroke="#e5e7eb"/><text class="tick" x="{left - 8}" y="{sy(y) + 4:.1f}" '
            f'text-anchor="end" font-size="11" fill="#6b7280">{_label(y)}</text>'
        )
    for x in x_ticks:
        out.append(
            f'<line class="tickmark" x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{top + plot_h}" '
            f'y2="{top + plot_h + 5}" stroke="#9ca3af"/><text class="tick" x="{sx(x):.1f}" '
            f'y="{top + plot_h + 18}" text-anchor="middle" font-size="11" fill="#6b7280">'
            f"{_label(x)}</text>"
        )
    out.append(
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" '
        f'stroke="#9ca3af"/><line class="axis" x1="{left}" x2="{left + plot_w}" '
        f'y1="{top + plot_h}" y2="{top + plot_h}" stroke="#9ca3af"/>'
    )
    return out
