"""subnet.topology is pure data handling, and topologies/ is pure data."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from subnet.topology import specs_dir

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "subnet" / "topology"
FORBIDDEN = ("torch", "bittensor", "boto3", "numpy", "subnet.neuron", "subnet.chain",
             "subnet.training", "subnet.model", "subnet.storage.s3")  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_topology_package_imports_nothing_heavy():
    for path in PACKAGE.glob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"


def test_importing_it_loads_nothing_heavy():
    code = (
        "import sys, subnet.topology as t; t.builtin_specs(); "
        f"print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout  # fmt: skip
    assert out.strip() == "[]"


def test_topologies_folder_holds_only_data_files():
    assert specs_dir() == ROOT / "topologies"
    files = [p for p in specs_dir().rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files and all(p.suffix == ".toml" for p in files), files
