"""Room mode's runtime: ``--room ADDRESS --run NAME`` builds the same roles' runtime with the
room's seams (room membership, a time clock, no weight sink), or refuses in one line."""

from __future__ import annotations

import itertools

import pytest

from subnet.clock import TimeClock
from subnet.config import BeamConfig, ConfigError
from subnet.errors import SetupError
from subnet.localnet.wallets import dev_wallet
from subnet.node.build import build_runtime
from subnet.room import ops
from subnet.room.address import RoomAddress, parse_address
from subnet.room.errors import RoomError
from subnet.room.invite import make_invite
from subnet.room.membership import RoomMembership
from subnet.room.node import own_read
from subnet.room.pace import LEAD_WINDOWS, RoomPace, change_tick
from subnet.room.runs import publish_run
from subnet.storage.config import StorageConfig
from subnet.storage.s3 import S3Store
from subnet.topology import Template
from subnet.weights import NoWeights

_ids = itertools.count()


@pytest.fixture
def room(moto_server, tmp_path, monkeypatch):
    """Room ``lab``: owner (holder), a validator and a miner; run ``r1`` of the scored subnet."""
    for k, v in moto_server.environ().items():
        monkeypatch.setenv(k, v)
    url = moto_server.endpoint_url
    wallets = {n: dev_wallet(tmp_path / "w", n) for n in ("owner", "val", "miner", "eve")}
    storage, test = {}, next(_ids)
    for n in wallets:
        storage[n] = StorageConfig(bucket=f"node{test}-{n}", endpoint_url=url,
                                   addressing_style="path")  # fmt: skip
        S3Store.from_config(storage[n]).ensure_bucket()
    address = RoomAddress(url, f"node{test}-owner", "lab")
    rs = address.open()
    owner = wallets["owner"].hotkey
    ops.create_room(rs, owner, own_read(storage["owner"]), ["holder"])
    for n, perms, slot in (("val", ["runs.observe", "runs.score"], "validator"),
                           ("miner", ["runs.train"], "miner")):  # fmt: skip
        invite = make_invite(owner, rs.latest().body, str(address), perms, [slot], 60.0)
        ops.join_room(rs, wallets[n].hotkey, invite, own_read(storage[n]))
    ops.admit(rs, owner)
    cfg = BeamConfig()
    publish_run(rs, owner, "r1", Template(topology="@beam/scored-subnet@2.0.0"), cfg.protocol, 1.0)

    def config(name: str, **node) -> BeamConfig:
        return BeamConfig.model_validate({"node": {
            "room": str(address), "run": "r1", "storage": storage[name].model_dump(),
            "wallet": {"name": name, "path": str(tmp_path / "w")},
            "neuron": {"state_dir": str(tmp_path / "state")}, **node}})  # fmt: skip

    return config, rs, wallets


def test_a_member_gets_the_room_seams_and_the_pinned_plan(room) -> None:
    config, rs, wallets = room
    rt = build_runtime(config("val"), "validator")
    run = rs.latest().body.run("r1")
    assert isinstance(rt.membership, RoomMembership) and isinstance(rt.clock, TimeClock)
    assert isinstance(rt.weights, NoWeights) and rt.plan.digest == run.digest
    assert rt.cfg.protocol.run == "r1" and rt.clock.origin == run.origin
    assert rt.slot_of("validator").name == "validator"


def test_the_owner_paces_the_run_and_members_follow_after_their_next_read(room) -> None:
    config, rs, wallets = room
    rt = build_runtime(config("miner"), "miner")
    run = rs.latest().body.run("r1")
    blocks = rt.cfg.protocol.window.blocks
    pace = RoomPace(lambda: rs, wallets["owner"].hotkey, "r1", 1.0, run.origin, blocks)
    now = pace.clock.now()
    pace(2.5)  # lengthen: at the start of the window after next, never in a running window
    tick = (max(now, 0) // blocks + LEAD_WINDOWS) * blocks
    assert pace.changes == [(tick, 2.5)]
    assert rs.latest().body.run("r1").pace_changes() == [(tick, 2.5)]
    pace(1.0)  # one change pending at a time: this one waits
    assert pace.changes == [(tick, 2.5)]
    assert rt.clock.segments() == [(0, run.origin, 1.0)]  # the member has not re-read yet
    rt.membership.refresh()
    assert rt.clock.segments() == pace.clock.segments()
    assert rt.clock.start_of(tick + 1) == run.origin + tick + 2.5
    with pytest.raises(RoomError, match="must come after it"):
        ops.add_pace(rs, wallets["owner"].hotkey, "r1", tick, 3.0)
    with pytest.raises(RoomError, match="only the owner"):
        ops.add_pace(rs, wallets["miner"].hotkey, "r1", tick + blocks, 3.0)


CHANGES = [(-5, None, 60), (0, None, 60), (29, None, 60), (30, None, 90), (31, 60, None)]


@pytest.mark.parametrize("now,last,expected", [*CHANGES, (60, 60, 120)])
def test_a_pace_change_starts_two_windows_ahead_and_one_at_a_time(now, last, expected) -> None:
    assert change_tick(now, 30, last) == expected


def test_a_stranger_and_a_missing_run_are_refused(room) -> None:
    config, _, _ = room
    with pytest.raises(SetupError, match="is not a member of room 'lab'"):
        build_runtime(config("eve"), "miner")
    with pytest.raises(RoomError, match="has no run 'nope'"):
        build_runtime(config("miner", run="nope"), "miner")
    with pytest.raises(ConfigError, match="--room needs --run"):
        build_runtime(config("miner", run=""), "miner")


@pytest.mark.parametrize(
    "text", ["http://h:1/bucket", "ftp://h/b/r", "s3://B_ad/r", "http://a@h/b/r"]
)
def test_bad_addresses_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(RoomError, match="BUCKET/ROOM"):
        parse_address(text)


def test_addresses_round_trip() -> None:
    for text in ("http://127.0.0.1:5000/beam-owner/lab", "s3://my-bucket/lab"):
        assert str(parse_address(text)) == text
