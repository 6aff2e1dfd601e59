"""The validator's equivocation book: what it keeps, forgets and saves (its proofs are played
through the real roles in ``test_commit_reveal.py``)."""

from __future__ import annotations

from subnet.neuron.equivocation import KEEP_WINDOWS, Equivocations


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
