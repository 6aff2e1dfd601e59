"""A topology reference that does not bind says what would: the versions, or the close name."""

from __future__ import annotations

import pytest

from subnet.topology import PlanError
from subnet.topology.loader import load_spec


def test_an_unversioned_reference_lists_the_exact_ones() -> None:
    with pytest.raises(PlanError) as caught:
        load_spec("@beam/gossip-ring")
    assert caught.value.reason == "bad_reference"
    assert "versions: @beam/gossip-ring@1.0.0" in str(caught.value)


def test_a_misspelled_name_gets_a_did_you_mean() -> None:
    with pytest.raises(PlanError) as caught:
        load_spec("@beam/gosip-ring@1.0.0")
    assert caught.value.reason == "unknown_topology"
    assert "did you mean @beam/gossip-ring@1.0.0?" in str(caught.value)
    with pytest.raises(PlanError, match="did you mean @beam/fedavg@"):
        load_spec("@beam/fedavgg")
