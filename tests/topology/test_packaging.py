"""The builtin specs ship in the wheel, and an installed package finds them (not the source tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_installed_wheel_finds_the_builtin_specs(tmp_path):
    # Build from a copy so the worktree gets no build/ or egg-info folders.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("subnet", "topologies"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, timeout=300, capture_output=True)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    # every data file under topologies/ (specs, and any subfolder such as templates/) ships
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("topologies/")}
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "topologies").rglob("*.toml")}
    assert shipped == source and len([n for n in shipped if n.count("/") == 1]) == 13, shipped

    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True,
                   timeout=300, capture_output=True)  # fmt: skip
    code = (
        "import subnet.topology as t; "
        "print(t.__file__); print(t.specs_dir()); print(len(t.builtin_specs())); "
        "print(t.load_spec('@beam/scored-subnet@2.0.0').ref)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()  # fmt: skip
    assert out[0].startswith(str(target)) and out[1] == str(target / "topologies")
    assert out[2:] == ["13", "@beam/scored-subnet@2.0.0"]
