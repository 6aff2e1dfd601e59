"""Replay classes through the real roles, in memory (``subnet.verify.classes``,
``subnet.neuron.class_book``): a validator checks only the classes it covers, never bans for
another, never pays a class nobody can check, and a sender that changes class starts over.

The harness is ``test_checks``'s: one validator, every upload checked (``checks = 4``)."""

from __future__ import annotations

import functools

import pytest

import subnet.neuron.validator as validator_module
from subnet.data import random_sample_ids
from subnet.neuron.class_book import ClassBook
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.verify.classes import ReplayClass, accepted, covered, of_machine
from tests.neuron.test_checks import ALL, Inflater, play, records, roles, verdicts

GPU = "cuda-sm90-nvidia-h100-80gb-hbm3-cu12.8/bf16/torch2.13.0-cu128"


class GpuLiar(Inflater):
    """Sends twice its update and says it trained in a GPU class no validator here covers."""

    def setup(self) -> None:
        super().setup()
        self.replay_class = GPU


class Switcher(Miner):
    """Honest, and says a GPU class from window ``SWITCH`` on (a driver upgrade, or a liar)."""

    SWITCH = 1

    def step(self, window: int):
        if window >= self.SWITCH:
            self.replay_class = GPU
        return super().step(window)


def _world(world_with, monkeypatch, **scoring):
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"}
    return world_with(names, scoring={**ALL, **scoring})


def test_an_upload_states_its_class_and_the_notice_what_its_validator_covers(
    world_with, monkeypatch
) -> None:
    world = _world(world_with, monkeypatch)
    holder, m1, m2, validator = roles(world)
    play(holder, [m1, m2], validator, 0)
    mine = str(of_machine("cpu", "fp32"))
    assert m1.replay_class == mine
    assert validator.checker.book.covers == tuple(str(c) for c in covered("cpu"))
    assert validator.checker.book.covers[0] == mine
    assert m1.claim.coverage == {validator.rt.hotkey: validator.checker.book.covers}
    assert m1.claim.told is True  # "a validator checks class ..."


def test_a_class_no_validator_covers_is_never_checked_banned_or_paid(
    world_with, monkeypatch
) -> None:
    # pay_unverified on: what a launching subnet may publish. A liar that claims a class no
    # validator replays would be paid unchecked for good; it is held at 0 instead.
    world = _world(world_with, monkeypatch, pay_unverified=True)
    holder, m1, liar, validator = roles(world, GpuLiar)
    for window in range(3):
        play(holder, [m1, liar], validator, window)
        why, score = verdicts(validator)[liar.rt.hotkey]
        assert (why, score) == ("unverified", 0.0)
        assert verdicts(validator)[m1.rt.hotkey][1] > 0.0  # the honest one is paid
    assert records(validator, "scores")[-1]["details"][liar.rt.hotkey] == (
        f"no validator replays its class {GPU}"
    )
    checks = records(validator, "check")
    checked = {c["hotkey"] for c in checks if c["ok"] is not None}
    assert liar.rt.hotkey not in checked and liar.rt.hotkey not in validator.checker.banned
    # named once, before its first upload said its class; then dropped, not checked; never again
    dropped = [c["window"] for c in checks if c["reason"] == "not_covered"]
    assert dropped == [0]
    assert m1.rt.hotkey in validator.checker.verified
    assert liar.claim.told is False  # the miner was told, in one line, that nobody covers it


def test_a_verified_sender_that_changes_class_starts_over(world_with, monkeypatch) -> None:
    world = _world(world_with, monkeypatch)
    holder, m1, switcher, validator = roles(world, Switcher)
    play(holder, [m1, switcher], validator, 0)
    assert switcher.rt.hotkey in validator.checker.verified
    play(holder, [m1, switcher], validator, 1)  # now in a class this validator cannot replay
    assert switcher.rt.hotkey not in validator.checker.trusted
    assert verdicts(validator)[switcher.rt.hotkey] == ["unverified", 0.0]
    assert validator.checker.book.since(switcher.rt.hotkey) == 1
    named = validator.checker.targets[2] if 2 in validator.checker.targets else []
    play(holder, [m1, switcher], validator, 2)
    assert switcher.rt.hotkey not in validator.checker.targets[2] + named  # not drawn here
    assert switcher.rt.hotkey not in validator.checker.banned  # never banned for its class


def test_the_class_book_draws_over_its_own_classes_and_peers() -> None:
    book = ClassBook(["a/fp32/t", "a/bf16/t"], quorum=2)
    assert book.of(None) == "cpu-avx2-mkl.avx2/fp32/t"  # none stated: the pinned CPU class
    assert not book.observe("m1", "a/fp32/t", 3) and book.since("m1") == -1  # first seen
    assert book.observe("m1", "b/fp32/t", 5) and book.since("m1") == 5
    assert not book.observe("m1", "a/fp32/t", 4)  # an older upload read late changes nothing
    assert not book.mine("m1") and book.mine("never-seen")
    book.window = 6
    assert not book.checkable("m1")
    book.learn("v2", ["b/fp32/t"])
    assert not book.checkable("m1")  # one validator's covers alone: not enough
    book.learn("v4", ["b/fp32/t", "b/bf16/t"])
    assert book.checkable("m1")  # two cover it: pay_unverified may pay it here
    book.window = 5
    assert not book.checkable("m1")  # not while its class is the window's new one
    book.learn("v3", [])  # a notice that says nothing changes nothing
    book.learn("v5", ["a/fp32/t", "a/bf16/x"])  # the same fp32 class, other bf16 kernels
    assert book.peers(["v1", "v2", "v3", "v4", "v5"], "v1") == ["v1", "v3", "v5"]
    again = ClassBook(book.covers)
    again.load_state_dict(book.state_dict())
    assert again.senders == book.senders


def test_a_class_parses_whole_and_patterns_accept_it() -> None:
    cls = ReplayClass.parse("cpu-avx2-mkl.avx2/fp32/torch2.13.0+cpu")
    assert str(cls) == "cpu-avx2-mkl.avx2/fp32/torch2.13.0+cpu" and not cls.bf16
    for bad in ("", "cpu/fp16/t", "CPU/fp32/t", "a/fp32/b/c", "a/fp32/" + "t" * 200, 7):
        try:
            ReplayClass.parse(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} parsed")
    assert accepted(cls, []) and accepted(cls, ["cpu-avx2-*/fp32/*"])
    assert not accepted(cls, ["cuda-*"])


def test_a_class_the_subnet_does_not_accept_is_refused_and_such_a_miner_does_not_start(
    world_with, monkeypatch
) -> None:

    from subnet.config import ConfigError

    world = _world(world_with, monkeypatch, classes=["cpu-*/fp32/*"])
    holder, m1, liar, validator = roles(world, GpuLiar)
    play(holder, [m1, liar], validator, 0)
    report = records(validator, "scores")[-1]
    assert report["verdicts"][liar.rt.hotkey] == ["rejected", 0.0]
    assert report["details"][liar.rt.hotkey] == "class_refused"
    assert verdicts(validator)[m1.rt.hotkey][0] != "class_refused"
    gpu_only = _world(world_with, monkeypatch, classes=["cuda-*"])
    assert ModelHolder(gpu_only.runtimes["holder"]).try_setup()  # publishes the dataset
    miner = Miner(gpu_only.runtimes["m1"])
    miner.rt.beacon = lambda tick: f"beacon-{tick}"  # checks on: the class is said
    with pytest.raises(ConfigError, match="which the subnet does not accept"):
        miner.setup()


class Flipper(Inflater):
    """Lies, and flips between this machine's class and a GPU class every window: each draw
    goes by its last class, so a check named for it finds the other one."""

    def step(self, window: int):
        own = str(of_machine("cpu", "fp32"))
        self.replay_class = own if window % 2 else GPU
        return super().step(window)


def test_a_sender_that_flips_class_every_window_is_never_paid_unverified(
    world_with, monkeypatch
) -> None:
    world = _world(world_with, monkeypatch, pay_unverified=True)
    holder, m1, flipper, validator = roles(world, Flipper)
    for window in range(4):
        play(holder, [m1, flipper], validator, window)
        assert verdicts(validator)[flipper.rt.hotkey][1] == 0.0, window
    assert flipper.rt.hotkey not in validator.checker.verified  # nor ever checked, nor banned
