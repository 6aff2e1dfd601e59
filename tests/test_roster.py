"""The roster: lookups by hotkey and slot, permissions, a stable digest, refusals."""

import pytest

from subnet.membership import Member, Roster

A, B, C = "5" + "A" * 47, "5" + "B" * 47, "5" + "C" * 47


def roster() -> Roster:
    return Roster((
        Member(A, frozenset({"holder"}), frozenset({"run.lead"}), uid=0),
        Member(B, frozenset({"validator"}), frozenset({"runs.observe", "runs.score"}), uid=1),
        Member(C, frozenset({"miner"}), frozenset({"runs.train"}), uid=2),
    ))  # fmt: skip


def test_lookups():
    r = roster()
    assert r.in_slot("miner") == [C] and r.in_slot("validator") == [B] and r.in_slot("x") == []
    assert r.get(B).uid == 1 and r.get("nobody") is None and A in r and "nobody" not in r
    assert (
        r.may(B, "runs.score") and not r.may(C, "runs.score") and not r.may("nobody", "runs.train")
    )
    assert r.hotkeys() == sorted([A, B, C])


def test_digest_is_order_free_and_changes_with_content():
    r = roster()
    assert Roster(tuple(reversed(r.members))).digest() == r.digest()
    fewer = Roster(r.members[:2])
    assert fewer.digest() != r.digest()


def test_refusals():
    with pytest.raises(ValueError, match="unknown permissions"):
        Member(A, frozenset({"miner"}), frozenset({"runs.everything"}))
    with pytest.raises(ValueError, match="twice"):
        Roster((Member(A, frozenset()), Member(A, frozenset({"miner"}))))
