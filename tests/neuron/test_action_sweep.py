"""Sweep fan-out: workers take the sweep points in turn."""

from __future__ import annotations

import pytest

from subnet.neuron.actions.sweep import assign_points


def test_points_are_assigned_in_turn():
    assert assign_points(["c", "a", "b"], [0.1, 0.2]) == {"a": 0.1, "b": 0.2, "c": 0.1}
    with pytest.raises(ValueError):
        assign_points(["a"], [])
