"""RoomMembership: the roster, readers and permissions a room run's neurons see."""

from __future__ import annotations

import pytest
from loguru import logger
from room_support import key, read_of

from subnet.errors import SetupError
from subnet.room.membership import RoomMembership
from subnet.room.ops import create_room, leave, next_body, revoke
from subnet.room.store import RoomStore
from subnet.storage.memory import MemoryStore
from subnet.storage.readers import ReaderPool
from subnet.topology import load_spec

SPEC = load_spec("@beam/scored-subnet@2.0.0")
ALL = ["data.grant", "run.lead", "runs.observe", "runs.score", "runs.train"]
PEOPLE = {  # name -> (permissions, slots)
    "Owner": (ALL, ["holder"]),
    "M1": (["runs.train"], ["miner"]),
    "M2": (["runs.train"], ["miner"]),
    "V1": (["runs.observe", "runs.score"], ["validator"]),
    "V2": (["runs.observe"], ["validator"]),  # never granted runs.score
}


def hk(name: str) -> str:
    return key(name).ss58_address


@pytest.fixture
def world():
    """A room (in memory) with the people above, and one bucket per member."""
    buckets = {f"beam-{n.lower()}": MemoryStore(n) for n in [*PEOPLE, "Eve"]}
    rs = RoomStore(MemoryStore("room"), "lab")
    m = create_room(rs, key("Owner"), read_of("beam-owner"))
    members = []
    for name, (perms, slots) in PEOPLE.items():
        members.append(m.body.members[0].model_copy(update={
            "hotkey": hk(name), "permissions": perms, "slots": slots, "admit": name == "Owner",
            "read": read_of(f"beam-{name.lower()}"), "since": 0 if name == "Owner" else 1}))  # fmt: skip
    rs.publish(key("Owner"), m, next_body(m, members=members))

    def member(name: str) -> RoomMembership:
        pool = ReaderPool(factory=lambda s: buckets[s.bucket], allow_private_endpoints=True)
        ms = RoomMembership(rs, "r1", hk(name), SPEC, pool)
        ms.refresh()
        return ms

    return rs, member, buckets


def test_slots_follow_the_manifest_and_need_their_permissions(world) -> None:
    rs, member, _ = world
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        roster = member("Owner").roster
    finally:
        logger.remove(sink)
    assert roster.in_slot("miner") == sorted([hk("M1"), hk("M2")])
    assert roster.in_slot("validator") == [hk("V1")]  # V2 lacks runs.score
    assert roster.in_slot("holder") == [hk("Owner")]
    assert any(hk("V2") in line and "lacks runs.score" in line for line in lines)


def test_a_revoked_score_permission_drops_the_scorer_at_the_next_refresh(world) -> None:
    rs, member, _ = world
    holder = member("Owner")
    assert hk("V1") in holder.roster.in_slot("validator")
    revoke(rs, key("Owner"), hk("V1"), ["runs.score"])
    holder.refresh()
    assert holder.roster.in_slot("validator") == []
    assert holder.refused[(hk("V1"), "validator")] == "lacks runs.score"
    assert holder.roster.may(hk("V1"), "runs.observe")  # still a member, still observes


def test_readers_follow_lanes_and_observe(world) -> None:
    _, member, buckets = world
    m1 = member("M1")  # a miner reads the model lane and the data, never another's gradients
    assert m1.readers.get(hk("Owner")) is buckets["beam-owner"]
    assert m1.readers.get(hk("M2")) is None
    v2 = member("V2")  # no slot, but runs.observe: may read the broadcast grads lane
    assert v2.readers.get(hk("M2")) is buckets["beam-m2"]
    v1 = member("V1")
    assert v1.readers.get(hk("M1")) is buckets["beam-m1"]
    assert v1.readers.get(hk("Eve")) is None  # never a member


def test_a_non_member_is_refused_and_never_read(world) -> None:
    rs, member, _ = world
    pool = ReaderPool(factory=lambda s: MemoryStore(s.bucket), allow_private_endpoints=True)
    eve = RoomMembership(rs, "r1", hk("Eve"), SPEC, pool)
    with pytest.raises(SetupError, match="not a member of room 'lab'"):
        eve.join()
    assert hk("Eve") not in member("Owner").roster
    assert member("V1").readers.get(hk("Eve")) is None


def test_data_comes_only_from_a_data_grant_holder(world, tmp_path) -> None:
    from subnet.config import BeamConfig
    from subnet.errors import NotReady
    from subnet.monitor import MetricsSink
    from subnet.neuron.runtime import Runtime
    from subnet.node.plan import subnet_plan

    rs, member, _ = world
    ms = member("M1")
    cfg = BeamConfig()
    rt = Runtime(cfg=cfg, role="miner", signer=key("M1"), store=MemoryStore(), membership=ms,
                 clock=None, plan=subnet_plan(cfg.protocol, ms.roster),
                 metrics=MetricsSink(tmp_path / "m.jsonl"), state_dir=tmp_path)  # fmt: skip
    assert rt.data_owner() == hk("Owner")
    m = rs.latest()  # the holder loses data.grant: it no longer serves (or fills) the holder slot
    kept = [x for x in m.body.members if x.hotkey != hk("Owner")]
    less = m.body.member(hk("Owner")).model_copy(
        update={"permissions": [p for p in ALL if p != "data.grant"]}
    )
    rs.publish(key("Owner"), m, next_body(m, members=[*kept, less]))
    ms.refresh()
    assert ms.refused[(hk("Owner"), "holder")] == "lacks data.grant"
    with pytest.raises(NotReady):
        rt.data_owner()


def test_a_leave_counts_at_once(world) -> None:
    rs, member, _ = world
    holder, m2 = member("Owner"), member("M2")
    leave(rs, key("M2"))
    holder.refresh()
    assert hk("M2") not in holder.roster and holder.readers.get(hk("M2")) is None
    lines: list[str] = []
    sink = logger.add(lines.append, level="WARNING")
    try:
        m2.refresh()
    finally:
        logger.remove(sink)
    assert any("is no longer a member of room lab" in line for line in lines)
    assert m2.readers.get(hk("Owner")) is None  # a member that left reads nobody


def test_a_rolled_back_pointer_keeps_the_verified_view(world) -> None:
    rs, member, _ = world
    holder = member("Owner")
    rs.store.put(rs.pointer_key, rs.read_version(0).doc.raw)
    holder.refresh()  # refused and logged; the roster stays
    assert holder.manifest.version == 1 and hk("V1") in holder.roster
