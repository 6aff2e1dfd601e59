"""The in-memory worlds of ``tests/neuron`` (real roles, real plans and signed envelopes,
in-memory stores, manual clocks), for the fault tests that drive whole roles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "neuron" / "conftest.py"
_SPEC = importlib.util.spec_from_file_location("neuron_worlds", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
worlds = importlib.util.module_from_spec(_SPEC)
sys.modules["neuron_worlds"] = worlds  # dataclasses look their module up while it loads
_SPEC.loader.exec_module(worlds)

neuron_data_dir = worlds.neuron_data_dir
world = worlds.world
world_with = worlds.world_with
