"""The dependency lock (`constraints.txt`): complete, without torch, and what this venv runs."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import lock  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib


def declared() -> list[Requirement]:
    """Every requirement in pyproject.toml: the dependencies and the dev extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = project["dependencies"] + project["optional-dependencies"]["dev"]
    return [Requirement(text) for text in texts]


def test_the_lock_pins_every_declared_dependency_but_torch() -> None:
    pinned = lock.pins(lock.LOCK.read_text())
    for requirement in declared():
        if requirement.marker and not requirement.marker.evaluate():
            continue
        name = lock.canonical(requirement.name)
        if name == "torch":
            assert name not in pinned, "torch is the Makefile's TORCH_SPEC, never the lock's"
            continue
        assert name in pinned, f"{requirement.name} is declared but not in constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pinned[name]}, outside pyproject's "
            f"{requirement}"
        )


def test_this_venv_runs_what_the_lock_says_when_installed_from_it() -> None:
    stamp = Path(sys.prefix) / ".installed"
    digest = __import__("hashlib").sha256(lock.LOCK.read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text().split() != ["constraints.txt", digest]:
        pytest.skip("this environment was not installed by make install from this lock")
    wrong = {}
    for name, version in lock.pins(lock.LOCK.read_text()).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # pinned for another platform's or Python's dependency tree
        if installed != version:
            wrong[name] = (version, installed)
    assert not wrong, f"installed differs from constraints.txt (locked, installed): {wrong}"


def test_render_drops_torch_beam_and_editables_and_records_the_python() -> None:
    freeze = (
        "torch==2.13.0+cpu\nmoto==5.2.5\n-e git+https://x#egg=beam_subnet\n"
        "beam-subnet @ file:///w\nBoto3==1.0\niambic==3.0.0\n"
    )
    text = lock.render(freeze, "3.11", "Linux x86_64")
    assert lock.pins(text) == {"boto3": "1.0", "moto": "5.2.5"}
    assert lock.lock_python(text) == (3, 11)


def test_check_names_the_python_the_lock_needs(tmp_path, capsys) -> None:
    other = (sys.version_info[0], sys.version_info[1] + 1)
    path = tmp_path / "constraints.txt"
    path.write_text(lock.render("moto==5.2.5\n", f"{other[0]}.{other[1]}", "Linux"))
    assert lock.check(path) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("error: ")
    assert f"PYTHON=python{other[0]}.{other[1]}" in out[0] and "LOCK=" in out[0]
    here = sys.version_info
    path.write_text(lock.render("moto==5.2.5\n", f"{here[0]}.{here[1]}", "Linux"))
    assert lock.check(path) == 0


def test_pins_refuses_a_range() -> None:
    with pytest.raises(ValueError, match="name==version"):
        lock.pins("moto>=5\n")
