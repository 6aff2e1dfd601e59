"""Every role of every builtin topology restores what it saved: after a short in-memory run,
each member restarts from its state file and the two trees are compared
(``tests/neuron/test_role_state.py`` has the comparison and the subnet roles' own test)."""

from __future__ import annotations

import pytest
from test_in_memory import PROPERTIES, run_topology  # noqa: I001 (tests/topologies on sys.path)

from tests.neuron.test_role_state import check_round_trip


@pytest.mark.parametrize("ref", sorted(PROPERTIES))
def test_every_member_of_a_topology_restores_what_it_saved(world_with, ref):
    run = run_topology(world_with, ref, 2)
    assert not run.errors, run.errors
    for neuron in run.neurons.values():
        check_round_trip(neuron)
