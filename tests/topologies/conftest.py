"""Fixtures for the topology runs: the neuron tests' tiny dataset and in-memory world."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "neuron_conftest", Path(__file__).resolve().parents[1] / "neuron" / "conftest.py"
)
_neuron = importlib.util.module_from_spec(_spec)
sys.modules["neuron_conftest"] = _neuron  # dataclasses look their module up
_spec.loader.exec_module(_neuron)

make_world = _neuron.make_world
neuron_data_dir = _neuron.neuron_data_dir
world_with = _neuron.world_with
