"""A member's outbox and inbox on a lane: what one writes the other reads back, verified; an
object of another lane, plan or run is refused with its reason; a commit names no plan."""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair

from subnet.neuron.lanes import Inbox, Outbox
from subnet.storage.keys import ObjectKind, object_key
from subnet.storage.memory import MemoryStore
from subnet.wire import Reason, Rejected, encode_envelope, envelope_header
from subnet.wire.schema import CommitMeta, ScoreReportMeta

WRITER = Keypair.create_from_seed(bytes(range(32)))
RUN, PLAN, OTHER_PLAN = "run-1", "0123456789abcdef", "fedcba9876543210"
TENSORS = {"scores": torch.tensor([0.25, 0.5])}
REPORT = ScoreReportMeta(scores={WRITER.ss58_address: 0.25}, digests={}).wire()


def outbox(store: MemoryStore, lane: str | None = "scores", plan: str = PLAN) -> Outbox:
    return Outbox(store, WRITER, RUN, lane, plan)


def test_what_an_outbox_writes_its_lanes_inbox_reads_back() -> None:
    store = MemoryStore()
    key, written = outbox(store).publish(
        ObjectKind.SCORES, 4, TENSORS, metadata=REPORT, base_version=2
    )
    assert written and key == object_key(
        RUN, ObjectKind.SCORES, 4, WRITER.ss58_address, lane="scores"
    )
    sender = WRITER.ss58_address
    inbox = Inbox(RUN, "scores", PLAN)
    assert inbox.key(ObjectKind.SCORES, 4, sender) == key
    envelope = inbox.fetch(store, ObjectKind.SCORES, 4, sender, max_bytes=1 << 16, base_version=2)
    assert torch.equal(envelope.tensors["scores"], TENSORS["scores"])
    assert (envelope.header.lane, envelope.header.plan) == ("scores", PLAN)
    # write-once: a second publication of the window (signed anew) finds the key taken
    assert outbox(store).publish(ObjectKind.SCORES, 4, TENSORS, metadata=REPORT) == (key, False)


@pytest.mark.parametrize(
    ("inbox", "reason"),
    [
        (Inbox(RUN, "scores", OTHER_PLAN), Reason.WRONG_PLAN),
        (Inbox("run-2", "scores", PLAN), Reason.WRONG_RUN),
    ],
)
def test_an_inbox_refuses_an_object_of_another_plan_or_run(inbox: Inbox, reason: Reason) -> None:
    store, sender = MemoryStore(), WRITER.ss58_address
    _, written = outbox(store).publish(ObjectKind.SCORES, 4, TENSORS, metadata=REPORT)
    # the object sits where the other inbox looks for it (a bucket can put anything anywhere)
    blob = store.get(outbox(store).key(ObjectKind.SCORES, 4), 1 << 16)
    store.put(inbox.key(ObjectKind.SCORES, 4, sender), blob)
    with pytest.raises(Rejected) as caught:
        inbox.fetch(store, ObjectKind.SCORES, 4, sender, max_bytes=1 << 16)
    assert written and caught.value.reason == reason


def test_an_object_moved_to_another_lane_is_refused_there() -> None:
    store, sender = MemoryStore(), WRITER.ss58_address
    box = outbox(store, lane="scores")
    blob = box.seal(ObjectKind.SCORES, 1, TENSORS, metadata=REPORT)
    assert box.write(ObjectKind.SCORES, 1, blob) and box.write(ObjectKind.SCORES, 1, blob)
    again = box.seal(ObjectKind.SCORES, 1, TENSORS, metadata=REPORT)  # signed anew: other bytes
    assert not box.write(ObjectKind.SCORES, 1, again)
    other = Inbox(RUN, "scores2", PLAN)
    store.put(other.key(ObjectKind.SCORES, 1, sender), blob)
    with pytest.raises(Rejected) as caught:
        other.fetch(store, ObjectKind.SCORES, 1, sender, max_bytes=1 << 16)
    assert caught.value.reason == Reason.WRONG_LANE
    read = Inbox(RUN, "scores", PLAN).fetch(store, ObjectKind.SCORES, 1, sender, max_bytes=1 << 16)
    assert torch.equal(read.tensors["scores"], TENSORS["scores"])


def test_a_commit_names_no_plan_and_is_read_without_one() -> None:
    store, sender = MemoryStore(), WRITER.ss58_address
    meta = CommitMeta(commit="ab" * 32).wire()
    box = outbox(store, lane="grads")
    key, written = box.publish(ObjectKind.GRADIENT_COMMIT, 3, {}, metadata=meta)
    header = envelope_header(store.get(key, 1 << 16))
    assert written and header.plan is None
    # the header the miner signed before it had an outbox (the signature itself is randomized)
    kind = ObjectKind.GRADIENT_COMMIT
    before = encode_envelope(
        signer=WRITER, run=RUN, kind=kind, window=3, tensors={}, metadata=meta, lane="grads"
    )
    assert header == envelope_header(before)
    inbox = Inbox(RUN, "grads", PLAN)
    assert inbox.expected(kind, 3, sender).plan is None
    assert inbox.expected(ObjectKind.GRADIENT, 3, sender).plan == PLAN
    got = inbox.fetch(store, kind, 3, sender, max_bytes=1 << 16)
    assert got.message(CommitMeta).commit == "ab" * 32


def test_lane_none_is_each_kinds_default_lane() -> None:
    store = MemoryStore()
    key, _ = outbox(store, lane=None).publish(ObjectKind.SCORES, 0, TENSORS, metadata=REPORT)
    assert key == object_key(RUN, ObjectKind.SCORES, 0, WRITER.ss58_address)
    inbox = Inbox(RUN, None, PLAN)
    envelope = inbox.fetch(store, ObjectKind.SCORES, 0, WRITER.ss58_address, max_bytes=1 << 16)
    assert envelope.header.lane == "scores"
