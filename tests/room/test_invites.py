"""Invites and redemptions: each way an invite can be bad is refused with its own reason."""

from __future__ import annotations

import json

import pytest
from room_support import key, read_of

from subnet.room.errors import RoomError
from subnet.room.invite import (
    check_invite,
    check_redemption,
    from_token,
    make_invite,
    make_redemption,
    to_token,
)
from subnet.room.ops import admit, join_room
from subnet.room.signed import sign_doc

VALIDATOR = ["runs.observe", "runs.score"]


def _invite(room, issuer="Owner", perms=VALIDATOR, ttl=3600.0, now=None) -> bytes:
    m = room.latest().body
    return make_invite(key(issuer), m, "addr", perms, ["validator"], ttl, now=now)


def test_a_valid_invite_admits_the_joiner_with_its_grant(room) -> None:
    raw = _invite(room)
    assert from_token(to_token(raw)) == raw
    join_room(room, key("Val"), raw, read_of("beam-val"))
    result = admit(room, key("Owner"))
    member = result.manifest.body.member(key("Val").ss58_address)
    assert result.admitted == [key("Val").ss58_address]
    assert member.permissions == VALIDATOR and member.slots == ["validator"]
    assert member.since == 1 and result.manifest.version == 1


def test_expired_invite_is_refused(room) -> None:
    raw = _invite(room, ttl=60.0, now=1000.0)  # expired long ago
    with pytest.raises(RoomError) as e:
        check_invite(raw, room.latest().body, at=1061.0)
    assert e.value.reason == "expired"
    # Through storage: the server's write time is what counts, not the joiner's clock.
    join_room(room, key("Val"), raw, read_of("beam-val"))
    result = admit(room, key("Owner"))
    assert list(result.refused.values()) == ["expired"] and result.manifest.version == 0


def test_forged_invite_is_refused(room) -> None:
    # Validly signed, but by a key that is neither the owner nor an admitting member.
    m = room.latest().body
    body = json.loads(_invite(room))["body"]
    forged = sign_doc(key("Mallory"), "room-invite", body)
    with pytest.raises(RoomError) as e:
        check_invite(forged, m, at=0.0)
    assert e.value.reason == "forged"
    with pytest.raises(RoomError) as e:
        make_invite(key("Mallory"), m, "addr", VALIDATOR, [], 60.0)
    assert e.value.reason == "forged"


def test_tampered_invite_is_refused(room) -> None:
    doc = json.loads(_invite(room, perms=["runs.train"]))
    doc["body"]["permissions"] = ["run.lead", "runs.train"]  # grant itself more
    with pytest.raises(RoomError) as e:
        check_invite(json.dumps(doc).encode(), room.latest().body, at=0.0)
    assert e.value.reason == "bad_signature"


def test_reused_invite_is_refused_at_join_and_at_admission(room) -> None:
    raw = _invite(room)
    join_room(room, key("Val"), raw, read_of("beam-val"))
    with pytest.raises(RoomError) as e:  # the write-once redemption is taken
        join_room(room, key("Other"), raw, read_of("beam-other"))
    assert e.value.reason == "reused"
    m = admit(room, key("Owner")).manifest
    # Even if the redemption object were replaced by another joiner's, the manifest remembers.
    late = make_redemption(key("Other"), raw, read_of("beam-other"))
    with pytest.raises(RoomError) as e:
        check_redemption(late, m.body, 0.0)
    assert e.value.reason == "reused"
    nonce = json.loads(raw)["body"]["nonce"]
    room.store.put(room.redemption_key(nonce), late)
    assert admit(room, key("Owner")).admitted == []


def test_redemption_signed_by_someone_else_is_refused(room) -> None:
    raw = _invite(room)
    redemption = json.loads(make_redemption(key("Val"), raw, read_of("beam-val")))
    redemption["signer"] = key("Other").ss58_address  # claim to be another joiner
    with pytest.raises(RoomError) as e:
        check_redemption(json.dumps(redemption).encode(), room.latest().body, 0.0)
    assert e.value.reason == "bad_signature"


@pytest.mark.parametrize(
    "blob",
    [b"", b"{", b"[]", b'{"kind": 1}', b"\xff\xfe", b'{"a": NaN}', b"x" * 300_000,
     b'{"kind":"room-invite","signer":"x","body":{},"signature":"zz"}'],
)  # fmt: skip
def test_garbage_is_a_reason_never_a_crash(room, blob: bytes) -> None:
    with pytest.raises(RoomError) as e:
        check_invite(blob, room.latest().body, at=0.0)
    assert e.value.reason in {"malformed", "bad_signature"}
    with pytest.raises(RoomError):
        from_token("beam-invite:" + "!!!")


def test_an_admitter_grants_only_what_it_holds(room) -> None:
    # The owner invites an admitter holding runs.train only; it cannot invite a scorer.
    from subnet.room.ops import next_body

    m = room.latest()
    val = m.body.members[0].model_copy(update={"hotkey": key("Adm").ss58_address,
                                               "permissions": ["runs.train"], "since": 1})  # fmt: skip
    m = room.publish(key("Owner"), m, next_body(m, members=[*m.body.members, val]))
    m = room.publish(key("Owner"), m, next_body(m, members=[x.model_copy(update={"admit": True})
                     if x.hotkey == val.hotkey else x for x in m.body.members]))  # fmt: skip
    with pytest.raises(RoomError) as e:
        make_invite(key("Adm"), m.body, "addr", VALIDATOR, [], 60.0)
    assert e.value.reason == "forged"
    raw = make_invite(key("Adm"), m.body, "addr", ["runs.train"], ["miner"], 60.0)
    join_room(room, key("Miner"), raw, read_of("beam-miner"))
    result = admit(room, key("Adm"))  # the admitter publishes; readers accept it
    assert result.admitted == [key("Miner").ss58_address]
    assert room.latest().version == result.manifest.version == 3
