"""Manifest versions: write-once, followed one by one, rollback and unauthorised writers refused."""

from __future__ import annotations

import json

import pytest
from room_support import key, read_of

from subnet.room.errors import RoomError
from subnet.room.manifest import encode_manifest, parse_manifest
from subnet.room.ops import create_room, leave, next_body, revoke
from subnet.room.store import RoomStore


def _add(room: RoomStore, name: str, perms: list[str]):
    m = room.latest()
    new = m.body.members[0].model_copy(update={"hotkey": key(name).ss58_address, "admit": False,
                                               "permissions": perms, "since": m.version + 1})  # fmt: skip
    return room.publish(key("Owner"), m, next_body(m, members=[*m.body.members, new]))


def test_versions_are_write_once_and_chained(room: RoomStore) -> None:
    v1 = _add(room, "Val", ["runs.score"])
    assert room.latest().digest == v1.digest and v1.body.prev == room.read_version(0).digest
    with pytest.raises(RoomError) as e:  # the room exists
        create_room(room, key("Owner"), read_of("beam-owner"))
    assert e.value.reason == "conflict"


def test_a_non_owner_cannot_publish_a_manifest(room: RoomStore) -> None:
    m = room.latest()
    with pytest.raises(RoomError) as e:
        room.publish(key("Mallory"), m, next_body(m))
    assert e.value.reason == "not_authorized"
    # Written behind the publisher's back (a member with write access to the prefix): readers
    # following the versions refuse it.
    forged = encode_manifest(key("Mallory"), next_body(m))
    room.store.put(room.version_key(1), forged)
    room.store.put(room.pointer_key, forged)
    with pytest.raises(RoomError) as e:
        room.latest()
    assert e.value.reason == "not_authorized"
    with pytest.raises(RoomError) as e:
        revoke(room, key("Mallory"), key("Owner").ss58_address, None)
    assert e.value.reason == "not_authorized"


def test_rollback_is_refused(room: RoomStore) -> None:
    v0 = room.read_version(0)
    v1 = _add(room, "Val", ["runs.score"])
    room.store.put(room.pointer_key, v0.doc.raw)  # an attacker points back at version 0
    with pytest.raises(RoomError) as e:
        room.latest(known=v1)
    assert e.value.reason == "rollback"


def test_a_tampered_version_or_pointer_is_refused(room: RoomStore) -> None:
    v1 = _add(room, "Val", ["runs.score"])
    doc = json.loads(v1.doc.raw)
    doc["body"]["members"][-1]["permissions"] = ["run.lead", "runs.score"]
    room.store.put(room.pointer_key, json.dumps(doc).encode())
    with pytest.raises(RoomError) as e:
        room.latest()
    assert e.value.reason == "bad_signature"
    v0 = room.read_version(0)
    other = encode_manifest(key("Owner"), next_body(v0))  # validly signed, not the version 1
    room.store.put(room.pointer_key, other)
    with pytest.raises(RoomError) as e:
        room.latest()
    assert e.value.reason == "pointer_mismatch"
    with pytest.raises(RoomError) as e:
        room.latest(known=v1)
    assert e.value.reason == "fork"


def test_revoke_a_permission_then_the_member(room: RoomStore) -> None:
    val = key("Val").ss58_address
    _add(room, "Val", ["runs.observe", "runs.score"])
    m = revoke(room, key("Owner"), val, ["runs.score"])
    assert m.body.member(val).permissions == ["runs.observe"]
    m = revoke(room, key("Owner"), val, None)
    assert m.body.member(val) is None and room.latest().version == 3
    with pytest.raises(RoomError) as e:
        revoke(room, key("Owner"), val, None)
    assert e.value.reason == "not_member"


def test_leave_is_signed_by_the_member_and_applied_by_the_owner(room: RoomStore) -> None:
    from subnet.room.ops import admit

    val = key("Val").ss58_address
    _add(room, "Val", ["runs.score"])
    with pytest.raises(RoomError) as e:
        leave(room, key("Stranger"))
    assert e.value.reason == "not_member"
    room.store.put(room.leave_key(val), b"{}")  # someone else's "leave" of Val: ignored
    assert admit(room, key("Owner")).left == []
    leave(room, key("Val"))
    result = admit(room, key("Owner"))
    assert result.left == [val] and result.manifest.body.member(val) is None


@pytest.mark.parametrize("field,value", [("version", -1), ("room", "Bad Name"), ("owner", "x"),
                                         ("members", []), ("prev", "00")])  # fmt: skip
def test_malformed_manifests_are_refused(room: RoomStore, field: str, value) -> None:
    body = room.read_version(0).body.model_dump(mode="json")
    body[field] = value
    from subnet.room.signed import sign_doc

    with pytest.raises(RoomError) as e:
        parse_manifest(sign_doc(key("Owner"), "room-manifest", body))
    assert e.value.reason == "malformed"
