"""The WeightSink seam without a chain: a signed weights object for a consensus slot, or none."""

from __future__ import annotations

import json

from bittensor.sp_core import Keypair

from subnet.membership import Member, Roster
from subnet.storage.keys import ObjectKind
from subnet.storage.memory import MemoryStore
from subnet.weights import NoWeights, SignedWeights
from subnet.wire import Expected, WeightsMeta, fetch_envelope

SIGNER = Keypair.create_from_uri("//scorer")
A, B = (Keypair.create_from_uri(f"//{name}").ss58_address for name in ("a", "b"))
ROSTER = Roster((Member(A, frozenset({"miner"})), Member(B, frozenset({"miner"}))))


def test_signed_weights_publish_normalized_member_scores_on_their_lane():
    store = MemoryStore()
    sink = SignedWeights(store, SIGNER, "run", lane="weights")
    moving = {A: 3.0, B: 1.0, "stranger": 5.0}
    got = sink.offer(moving, ROSTER, window=4, last_tick=0)
    assert got.ok and got.weights == {A: 0.75, B: 0.25}  # non-members dropped
    expected = Expected("run", 4, ObjectKind.WEIGHTS, SIGNER.ss58_address, lane="weights")
    envelope = fetch_envelope(store, expected, None, max_bytes=1 << 20)
    assert json.loads(envelope.metadata["weights"]) == got.weights
    assert envelope.message(WeightsMeta).weights == got.weights  # parsed by its kind's schema
    assert envelope.header.lane == "weights"


def test_no_positive_score_publishes_nothing_and_no_sink_is_never_due():
    store = MemoryStore()
    assert SignedWeights(store, SIGNER, "run", lane="weights").offer(
        {A: 0.0}, ROSTER, window=1, last_tick=0
    ) is None  # fmt: skip
    assert list(store.list("")) == []
    assert NoWeights().offer({A: 1.0}, ROSTER, window=1, last_tick=0) is None
