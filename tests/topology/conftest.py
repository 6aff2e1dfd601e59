"""Shared helpers for the topology tests: the builtin specs, their vocabulary, fitting rosters."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import tomllib

from subnet.membership.roster import Member, Roster
from subnet.topology import Registries, TopologySpec, builtin_specs, spec_vocabulary, specs_dir
from subnet.topology.params import resolve, substitute


def fitting_roster(spec: TopologySpec, params: dict[str, Any] | None = None) -> Roster:
    """One member per slot minimum (at least one), each with exactly its slot's permissions."""
    values = resolve(spec.params, params or {})
    members = []
    for slot, role in spec.roles.items():
        low = substitute(role.min, values)
        for i in range(max(low, 1)):
            members.append(Member(f"{slot}-{i}", frozenset({slot}), frozenset(role.permissions)))
    return Roster(tuple(members))


@pytest.fixture(scope="session")
def specs() -> dict[str, TopologySpec]:
    """The builtin specs by name."""
    return {spec.name: spec for spec in builtin_specs()}


@pytest.fixture(scope="session")
def vocab(specs: dict[str, TopologySpec]) -> Registries:
    """Registries holding exactly the names the builtin specs use."""
    return spec_vocabulary(specs.values())


@pytest.fixture
def raw() -> Callable[[str], dict[str, Any]]:
    """A fresh, mutable copy of a builtin spec file's TOML data, by file stem."""

    def load(stem: str) -> dict[str, Any]:
        return copy.deepcopy(tomllib.loads((specs_dir() / f"{stem}.toml").read_text()))

    return load


@pytest.fixture
def fit() -> Callable[..., Roster]:
    """``fitting_roster`` as a fixture."""
    return fitting_roster
