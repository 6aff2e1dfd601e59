"""Human-friendly figures for the run page; every formatter shows ``None`` as an en dash."""

from __future__ import annotations

import time
from collections.abc import Iterable

DASH = "–"


def _scaled(value: float) -> str:
    """Three significant figures at most: ``9.56``, ``80.0``, ``400``."""
    if value < 10:
        return f"{value:.2f}"
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def fmt_bytes(n: float | None) -> str:
    """Decimal units: ``512 B``, ``80.0 kB``, ``1.63 GB``."""
    if n is None:
        return DASH
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} B" if unit == "B" else f"{_scaled(n)} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def fmt_seconds(s: float | None) -> str:
    """``0.84 s``, ``12.3 s``, ``3m 05s``, ``1h 02m``."""
    if s is None:
        return DASH
    if s < 60:
        return f"{_scaled(s)} s"
    if s < 3600:
        return f"{int(s // 60)}m {int(s % 60):02d}s"
    return f"{int(s // 3600)}h {int(s % 3600 // 60):02d}m"


def fmt_int(n: float | None) -> str:
    """Thousands separators: ``174,080``."""
    return DASH if n is None else f"{round(n):,}"


def fmt_ratio(x: float | None) -> str:
    """A compression factor: ``4,080×``, ``12.5×``."""
    if x is None:
        return DASH
    return f"{x:,.0f}×" if x >= 100 else f"{x:.1f}×"


def fmt_loss(x: float | None) -> str:
    """Cross-entropy to three decimals."""
    return DASH if x is None else f"{x:.3f}"


def fmt_share(x: float | None) -> str:
    """A fraction as a percentage: ``46.3%``."""
    return DASH if x is None else f"{100 * x:.1f}%"


def fmt_clock(t: float | None) -> str:
    """A unix time as ``HH:MM:SS`` UTC (the page says UTC once, in the column header)."""
    return DASH if t is None else time.strftime("%H:%M:%S", time.gmtime(t))


def fmt_datetime(t: float | None) -> str:
    """A unix time as ``YYYY-MM-DD HH:MM UTC``."""
    return DASH if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def fmt_windows(values: Iterable[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``3-5, 9`` (at most 8 ranges, then ``...``)."""
    ws = sorted(set(values))
    ranges: list[str] = []
    start = prev = None
    for w in [*ws, None]:
        if w is not None and prev is not None and w == prev + 1:
            prev = w
            continue
        if start is not None:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = w
    return ", ".join(ranges[:8]) + (", ..." if len(ranges) > 8 else "")
