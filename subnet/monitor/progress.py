"""Progress bars for long work that switch themselves off when stderr is not a terminal.

A neuron's output usually goes to a log file, where a bar is noise; an operator watching a
terminal sees inner steps, downloads and data preparation move.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(
    items: Iterable[T], *, total: int | None = None, desc: str, unit: str = "it"
) -> Iterator[T]:
    """``items`` with a bar on a terminal, unchanged elsewhere."""
    if not sys.stderr.isatty():
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True)
