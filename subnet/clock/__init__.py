"""Time: the ``Clock`` seam (where ticks come from) and the window arithmetic over ticks."""

from .block import BlockClock
from .ticks import Clock, ManualClock, TimeClock
from .window import PHASES, WindowClock

__all__ = ["PHASES", "BlockClock", "Clock", "ManualClock", "TimeClock", "WindowClock"]
