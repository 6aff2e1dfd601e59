"""Two models of one holder on two lanes: disjoint key spaces, each synced on its own, and an
object of one model copied into the other's key space is refused."""

from __future__ import annotations

import pytest
from bittensor.sp_core import Keypair
from torch import Tensor
from versions_support import CHECKPOINT_EVERY, RUN

from subnet.compression.patch import state_digest
from subnet.storage import MemoryStore
from subnet.storage.keys import parse_key
from subnet.versions import ModelSync, SyncError, VersionPublisher, layout

MAX = 16 << 20


def _publish(store, holder, lane, states) -> VersionPublisher:
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=CHECKPOINT_EVERY, lane=lane)
    for i, state in enumerate(states):
        publisher.publish(state, i - 1)
    return publisher


def test_two_lanes_of_one_holder_never_mix(holder: Keypair, history: list[dict[str, Tensor]]):
    store = MemoryStore("two")
    _publish(store, holder, "model_a", history[:3])  # model A at version 2
    _publish(store, holder, "model.p1", history[3:])  # another model, at version 3
    lanes = {parse_key(info.key).lane for info in store.list()}
    assert lanes == {"model_a", "model.p1"}  # nothing on the default lane

    a, got_a = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX, lane="model_a").sync(
        None, None
    )
    b, got_b = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX, lane="model.p1").sync(
        None, None
    )
    assert (got_a.version, got_b.version) == (2, 3)
    assert state_digest(a) == state_digest(history[2])
    assert state_digest(b) == state_digest(history[6])
    with pytest.raises(SyncError, match="not_published"):
        ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX).latest()


def test_an_object_moved_to_another_lane_is_refused(holder, history):
    store = MemoryStore("moved")
    _publish(store, holder, "model_a", history[:1])
    _publish(store, holder, "model_b", history[1:2])
    who = holder.ss58_address
    # Model A's checkpoint planted in model B's key space: validly signed, wrong lane.
    blob = store.get(layout.checkpoint_key(RUN, who, 0, "model_a"), MAX)
    store.put(layout.checkpoint_key(RUN, who, 0, "model_b"), blob)
    with pytest.raises(SyncError, match="wrong_lane"):
        ModelSync(store, who, RUN, max_bytes=MAX, lane="model_b", max_checkpoints=1).sync(
            None, None
        )
