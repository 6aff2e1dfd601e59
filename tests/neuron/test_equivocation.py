"""The equivocation books: the holder's pending names and the validator's digests and bans,
what each keeps, forgets and saves (the proofs are played through the real roles in
``test_commit_reveal.py``)."""

from __future__ import annotations

from subnet.neuron.equivocation import KEEP_WINDOWS, Caught, Equivocations
from subnet.versions.manifest import MAX_EQUIVOCATIONS


def test_scored_digests_are_kept_for_the_last_windows_and_bans_for_registered_hotkeys() -> None:
    book = Equivocations("run", "grads")
    for window in range(KEEP_WINDOWS + 3):
        book.record(window, {"a": f"{window:064x}"})
    assert sorted(book.scored) == list(range(3, KEEP_WINDOWS + 3))
    book.banned = {"a": 4, "b": 5}
    book.forget(["a", "c"])
    assert book.banned == {"a": 4}  # b deregistered: a new registration starts clean
    again = Equivocations("run", "grads")
    again.restore(book.state())
    assert (again.banned, again.scored) == (book.banned, book.scored)
    assert Equivocations("run", "grads").convict(None) == []


def test_the_holder_names_the_most_contradicted_senders_first_and_keeps_the_rest() -> None:
    """One validator's false digests cannot crowd out a sender every validator saw switch; what
    does not fit a version waits for the next, until no validator could check it any more."""
    caught = Caught()
    lone = {f"5{i:047d}": 1 for i in range(40)}  # contradicted by one report each
    caught.add(3, {**lone, "5" + "z" * 47: 2}, dict.fromkeys([*lone, "5" + "z" * 47], b"\xab"))
    caught.add(3, {"5nobody": 1}, {"5nobody": b""})  # no seal read: nothing to prove with
    named = caught.naming()
    assert len(named) == MAX_EQUIVOCATIONS and named["5" + "z" * 47] == "ab"
    caught.named(named)
    assert len(caught.pending) == 41 - MAX_EQUIVOCATIONS  # the rest wait for the next version
    again = Caught()
    again.load_state_dict(caught.state_dict())
    assert again.pending == caught.pending
    again.add(3 + KEEP_WINDOWS - 1, {}, {})
    assert len(again.pending) == 41 - MAX_EQUIVOCATIONS  # still checkable
    again.add(3 + KEEP_WINDOWS, {}, {})
    assert again.pending == {}  # validators keep KEEP_WINDOWS windows of digests
