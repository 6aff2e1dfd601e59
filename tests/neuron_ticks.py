"""Driving one role through a window by hand, for the tests of roles and topologies: the ticks
it sees, and the metrics records it wrote (``pyproject.toml`` puts ``tests/`` on the path)."""

from __future__ import annotations

import json

from subnet.clock import ManualClock


def run_at(neuron, *ticks: int) -> int:
    """Run ``neuron`` through one window that ticks at ``ticks`` (offsets in it); the windows
    it ran."""
    neuron.rt.clock = ManualClock(list(ticks))
    return neuron.run(max_windows=1)


def records(rt, event: str) -> list[dict]:
    """The metrics records of ``event`` the runtime ``rt`` wrote, oldest first."""
    lines = rt.metrics.path.read_text().splitlines() if rt.metrics.path.exists() else []
    return [r for r in map(json.loads, lines) if r["event"] == event]
