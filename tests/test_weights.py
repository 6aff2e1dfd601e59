"""The WeightSink seam without a chain: a signed weights object for a consensus slot, or none."""

from __future__ import annotations

import json

from bittensor.sp_core import Keypair

from subnet.membership import Member, Roster
from subnet.storage.keys import ObjectKind
from subnet.storage.memory import MemoryStore
from subnet.weights import NoWeights, SignedWeights
from subnet.wire import Expected, fetch_envelope

SIGNER = Keypair.create_from_uri("//scorer")
ROSTER = Roster((Member("a" * 48, frozenset({"miner"})), Member("b" * 48, frozenset({"miner"}))))


def test_signed_weights_publish_normalized_member_scores_on_their_lane():
    store = MemoryStore()
    sink = SignedWeights(store, SIGNER, "run", lane="weights")
    moving = {"a" * 48: 3.0, "b" * 48: 1.0, "stranger": 5.0}
    got = sink.offer(moving, ROSTER, window=4, last_tick=0)
    assert got.ok and got.weights == {"a" * 48: 0.75, "b" * 48: 0.25}  # non-members dropped
    expected = Expected("run", 4, ObjectKind.WEIGHTS, SIGNER.ss58_address, lane="weights")
    envelope = fetch_envelope(store, expected, None, max_bytes=1 << 20)
    assert json.loads(envelope.metadata["weights"]) == got.weights
    assert envelope.header.lane == "weights"


def test_no_positive_score_publishes_nothing_and_no_sink_is_never_due():
    store = MemoryStore()
    assert SignedWeights(store, SIGNER, "run", lane="weights").offer(
        {"a" * 48: 0.0}, ROSTER, window=1, last_tick=0
    ) is None  # fmt: skip
    assert list(store.list("")) == []
    assert NoWeights().offer({"a" * 48: 1.0}, ROSTER, window=1, last_tick=0) is None
