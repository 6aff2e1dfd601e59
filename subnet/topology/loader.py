"""Finding topology specs: the builtin ones shipped in ``topologies/``, or any spec file.

The builtin specs are data files in the top-level ``topologies/`` folder. The wheel installs that
folder next to the ``subnet`` package (pyproject.toml, package data), so the same relative lookup
finds it in a source checkout, an editable install and a plain ``pip install .``.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from .errors import PlanError
from .spec import TopologySpec, parse_spec
from .template import parse_ref

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def specs_dir() -> Path:
    """The folder holding the builtin specs (``<root>/topologies``, beside ``subnet/``)."""
    return Path(__file__).resolve().parents[2] / "topologies"


def load_spec_file(path: str | Path) -> TopologySpec:
    """The spec in one TOML file; PlanError ``bad_spec`` naming the file if it cannot be used."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError("bad_spec", f"spec file {path} not found") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise PlanError("bad_spec", f"{path}: {error}") from None
    return parse_spec(data, str(path))


def _builtin_index() -> dict[str, TopologySpec]:
    folder = specs_dir()
    if not folder.is_dir():
        raise PlanError(
            "bad_spec", f"builtin topologies folder {folder} is missing; reinstall beam-subnet"
        )
    index: dict[str, TopologySpec] = {}
    for path in sorted(folder.glob("*.toml")):
        spec = load_spec_file(path)
        if spec.ref in index:
            raise PlanError("bad_spec", f"{path}: {spec.ref} is defined twice")
        index[spec.ref] = spec
    return index


def builtin_specs() -> list[TopologySpec]:
    """Every builtin spec (all 13), sorted by name then version."""
    return sorted(
        _builtin_index().values(), key=lambda s: (s.name, tuple(map(int, s.version.split("."))))
    )


def load_spec(ref: str) -> TopologySpec:
    """The builtin spec ``ref`` binds exactly (``"@beam/fedavg@1.0.0"``).

    PlanError ``bad_reference`` for a loose reference, ``unknown_topology`` for an unknown name,
    ``unknown_version`` (listing the versions there are) for a known name at another version.
    """
    index = _builtin_index()
    try:
        name, version = parse_ref(ref)
    except PlanError as error:  # unversioned or misspelled: say what would bind
        base = ref.rsplit("@", 1)[0] if str(ref).count("@") > 1 else str(ref)
        exact = sorted(r for r, spec in index.items() if spec.name == base)
        hint = f"; versions: {', '.join(exact)}" if exact else _did_you_mean(base, index)
        raise PlanError(error.reason, f"{error.message}{hint}") from None
    if ref in index:
        return index[ref]
    versions = sorted(spec.version for spec in index.values() if spec.name == name)
    if versions:
        raise PlanError(
            "unknown_version", f"{name} has no version {version}; versions: {', '.join(versions)}"
        )
    names = sorted({spec.name for spec in index.values()})
    hint = _did_you_mean(name, index) or f"; builtin: {', '.join(names)}"
    raise PlanError("unknown_topology", f"no topology {name}{hint}")


def _did_you_mean(name: str, index: dict[str, TopologySpec]) -> str:
    """``"; did you mean @beam/x@1.0.0?"`` for the closest builtin name, or ``""``."""
    names = sorted({spec.name for spec in index.values()})
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not close:
        return ""
    refs = sorted(r for r, spec in index.items() if spec.name == close[0])
    return f"; did you mean {refs[-1]}?"
