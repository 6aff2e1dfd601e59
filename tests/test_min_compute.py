"""min_compute.yml parses, keeps the subnet-template layout, and names the documented torchrun command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML comes with bittensor; without it nothing parses")
ROOT = Path(__file__).resolve().parents[1]


def test_min_compute_has_every_role_and_tier() -> None:
    spec = yaml.safe_load((ROOT / "min_compute.yml").read_text())["compute_spec"]
    assert set(spec) == {"miner", "validator", "model_holder"}
    for role in spec.values():
        assert {"cpu", "gpu", "memory", "storage", "os", "network"} <= set(role)
    assert spec["miner"]["gpu"]["required"] is False


def test_the_multi_gpu_command_is_the_one_in_the_miner_guide() -> None:
    command = re.compile(r"torchrun --standalone --nproc_per_node \S+ neurons/miner\.py")
    assert command.search((ROOT / "min_compute.yml").read_text())
    assert command.search((ROOT / "docs" / "miner.md").read_text())
