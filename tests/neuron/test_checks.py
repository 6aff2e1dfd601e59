"""Checks of training through the real roles, in memory, on manual clocks that give a beacon.

Window ticks (``conftest``): upload ``[0, 4)``, the commit snapshot on tick 4, the beacon and the
validators' notices from tick 5, reveals from 6, score ``[4, 8)``, merge from 8; the next window
starts at 10. With ``checks = 4`` and ``check_share = 1`` the one validator checks every upload.
"""

from __future__ import annotations

import functools
import json

import pytest
import torch

import subnet.neuron.replay as replay_module
import subnet.neuron.validator as validator_module
from subnet.clock import ManualClock
from subnet.data import random_sample_ids
from subnet.neuron.answers import STATE_FROM, STATE_IN, STATE_OUT, notice_lane
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner, Upload, WindowSkipped
from subnet.neuron.validator import Validator
from subnet.storage.keys import ObjectKind, object_key
from subnet.verify.chunks import FRESH
from subnet.wire import CheckNotice, CheckVerdict, publish_envelope

ALL = {"checks": 4, "check_share": 1.0, "check_chunks": 0.5}


class BeaconClock(ManualClock):
    """A manual clock with a beacon (a chain's block hash stands there in subnet mode)."""

    def beacon(self, tick: int) -> str:
        return f"beacon-{tick}"


def run_at(neuron, *ticks: int) -> int:
    neuron.rt.clock = clock = BeaconClock(list(ticks))
    neuron.rt.beacon = clock.beacon  # declared on the runtime, as the subnet builder does
    return neuron.run(max_windows=1)


def records(neuron, event: str) -> list[dict]:
    lines = neuron.rt.metrics.path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


def verdicts(validator) -> dict[str, list]:
    return records(validator, "scores")[-1]["verdicts"]


def details(validator) -> dict[str, str]:
    return records(validator, "scores")[-1]["details"]


class Inflater(Miner):
    """Trains honestly and sends twice its update (its commitments stay honest)."""

    def step(self, window: int) -> Upload:
        honest = super().step(window)
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        delta = self.compressor.decode(honest.payload, shapes)
        return Upload(self.compressor.encode({k: 2 * v for k, v in delta.items()}),
                      honest.metadata)  # fmt: skip


class Mute(Miner):
    """Never answers a check."""

    def answer_checks(self, window: int, offset: int) -> None:
        return None


@pytest.fixture
def checked_world(world_with, monkeypatch):
    """Holder, validator and two miners; every upload checked."""
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"}
    return world_with(names, scoring=ALL)


def play(holder, miners, validator, window: int, answer: bool = True) -> None:
    """One window through every role: train and commit, notice, reveal, answer, score, merge."""
    t = 10 * window
    for m in miners:  # tick 1: the version_out gate lapses when nothing was merged
        assert run_at(m, t, t + 1) == 0
    assert run_at(validator, t + 4, t + 5) == 0
    for m in miners:
        assert run_at(m, t + 6) == 1
        if answer:
            run_at(m, t + 7)
    assert run_at(validator, t + 7) == 1
    assert run_at(holder, t + 8) == 1


def roles(world, m2_class=Miner):
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    return (
        holder,
        Miner(world.runtimes["m1"]),
        m2_class(world.runtimes["m2"]),
        Validator(world.runtimes["v1"]),
    )


def _metadata(world, name: str, hotkey: str, window: int) -> dict[str, str]:
    from tests.neuron.test_commit_reveal import _metadata as read

    key = object_key("beam", ObjectKind.GRADIENT, window, hotkey, lane="grads")
    return read(world.stores[name].get(key, 10**8))


def test_honest_uploads_pass_their_checks_window_after_window(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world)
    # The first window is paid to nobody (no check has passed yet); both pass, so the second
    # window pays both.
    for window, paid in ((0, "unverified"), (1, "scored")):
        play(holder, [m1, m2], validator, window)
        assert {verdicts(validator)[m.rt.hotkey][0] for m in (m1, m2)} == {paid}
    checks = records(validator, "check")
    assert len(checks) == 4 and all(c["ok"] for c in checks), checks
    assert all(c["error"] < 1e-6 for c in checks)  # one machine: equal up to the last bits
    # The second window continued the error feedback the first one committed to.
    first = _metadata(checked_world, "m1", m1.rt.hotkey, 0)
    second = _metadata(checked_world, "m1", m1.rt.hotkey, 1)
    assert first[STATE_IN] == FRESH and first[STATE_FROM] == ""
    assert first["threads"] == str(torch.get_num_threads())  # what a validator replays on
    assert second[STATE_FROM] == "0" and second[STATE_IN] == first[STATE_OUT] != FRESH
    # An answer is the drawn chunks only: far less than the error feedback itself.
    answer = object_key("beam", ObjectKind.CHECK_ANSWER, 1, m1.rt.hotkey, lane="grads")
    ef_bytes = 4 * sum(t.numel() for t in m1.line.ef.buffers.values())
    assert len(checked_world.stores["m1"].get(answer, 10**8)) < 0.75 * 2 * ef_bytes


def test_an_inflated_update_fails_its_check_and_its_sender_stays_banned(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world, Inflater)
    play(holder, [m1, m2], validator, 0)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert [(c["hotkey"], c["reason"]) for c in failed] == [(m2.rt.hotkey, "check_mismatch")]
    play(holder, [m1, m2], validator, 1)
    assert verdicts(validator)[m2.rt.hotkey] == ["rejected", 0.0]
    assert details(validator)[m2.rt.hotkey] == "check_banned"
    assert records(validator, "scores")[-1]["moving"].get(m2.rt.hotkey, 0.0) == 0.0
    assert verdicts(validator)[m1.rt.hotkey][0] == "scored"
    again = Validator(checked_world.runtimes["v1"])  # a restarted validator keeps the ban
    assert again.try_setup() and m2.rt.hotkey in again.checker.banned


def test_a_state_that_does_not_continue_the_committed_one_fails_at_once(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world)
    play(holder, [m1, m2], validator, 0)
    for name, buffer in m2.line.ef.buffers.items():  # a state no upload committed to
        m2.line.ef.buffers[name] = buffer + 0.01
    play(holder, [m1, m2], validator, 1)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert [(c["window"], c["hotkey"], c["reason"]) for c in failed] == [
        (1, m2.rt.hotkey, "check_broken_chain")
    ]
    assert failed[0]["seconds"] == 0.0  # no replay: the link alone decides
    assert verdicts(validator)[m1.rt.hotkey][0] == "scored"


def test_the_state_poisoner_is_found_out_by_the_check_of_the_window_it_lies_in(
    checked_world,
) -> None:
    class StatePoisoner(Miner):
        """Commits to an error feedback with a bias in it: its input minus what it sent is not
        the error feedback it proves."""

        def step(self, window: int) -> Upload:
            from subnet.neuron.answers import Held, chunk_map

            upload = super().step(window)
            held = self.held_now
            for name, buffer in self.line.ef.buffers.items():
                self.line.ef.buffers[name] = buffer - 0.05 * buffer.abs().mean()
            shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
            self.held_now = Held.of(chunk_map(self.rt, shapes), window, held.state_from,
                                    held.before, self.line.ef.state_dict())  # fmt: skip
            upload.metadata.update(self.held_now.wire())
            return upload

    holder, m1, m2, validator = roles(checked_world, StatePoisoner)
    play(holder, [m1, m2], validator, 0)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert [c["hotkey"] for c in failed] == [m2.rt.hotkey]
    # its claimed input moved (mismatch), and the top-k of it is no longer what it sent (codec)
    assert failed[0]["reason"] in {"check_mismatch", "check_codec"}


def test_a_missing_answer_is_owed_then_banned_past_the_grace(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world, Mute)
    play(holder, [m1, m2], validator, 0)
    assert not [c for c in records(validator, "check") if c["hotkey"] == m2.rt.hotkey]
    assert m2.rt.hotkey not in validator.checker.banned  # owed, not a lie: tried again
    # Not rejected: unpaid as every sender is before a check of it passes
    assert verdicts(validator)[m2.rt.hotkey][0] == "unverified"
    grace = checked_world.runtimes["v1"].cfg.protocol.scoring.check_grace
    for window in range(1, grace + 2):
        play(holder, [m1, m2], validator, window)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert (0, m2.rt.hotkey, "check_unanswered") in {
        (c["window"], c["hotkey"], c["reason"]) for c in failed
    }
    assert not [c for c in failed if c["hotkey"] == m1.rt.hotkey]


def test_an_answer_written_late_after_an_outage_passes(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world)
    play(holder, [m1, m2], validator, 0, answer=False)  # nobody answered in time
    assert records(validator, "check") == []
    play(holder, [m1, m2], validator, 1)  # both answer window 0 now, and window 1
    checks = records(validator, "check")
    assert {(c["window"], c["hotkey"]) for c in checks} == {
        (w, m.rt.hotkey) for w in (0, 1) for m in (m1, m2)
    }
    assert all(c["ok"] for c in checks) and not validator.checker.banned


def test_without_a_beacon_nothing_is_checked(world_with, monkeypatch) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    world = world_with({"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"},
                       scoring=ALL)  # fmt: skip
    holder, m1, m2, validator = roles(world, Inflater)
    for ticks, neurons in (([0], (m1, m2)), ([4, 5], (validator,)), ([6, 7], (m1, m2))):
        for n in neurons:
            n.rt.clock = ManualClock(ticks)
            n.run(max_windows=1)
    validator.rt.clock = ManualClock([7])
    assert validator.run(max_windows=1) == 1
    assert records(validator, "check") == []
    keys = [info.key for info in world.stores["m1"].list("beam/")]
    assert keys and not [k for k in keys if "/check-answer/" in k or "/checks/" in k]


def test_a_skipped_window_leaves_the_error_feedback_as_it_was(world) -> None:
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miner = Miner(world.runtimes["m1"])
    assert run_at(miner, 0) == 0  # one honest window: error feedback exists
    before = {k: v.clone() for k, v in miner.line.ef.buffers.items()}

    class Abandon:
        def train(self, *args, **kwargs):
            raise WindowSkipped("too slow")

    miner.pacer = Abandon()
    with pytest.raises(WindowSkipped):
        miner.step(1)
    assert all(torch.equal(before[k], v) for k, v in miner.line.ef.buffers.items())


def test_a_restart_after_the_commit_keeps_what_an_answer_needs(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world)
    assert run_at(m1, 0) == 0
    stream, held = m1.held[("grads", 0)]
    restarted = Miner(checked_world.runtimes["m1"])
    assert restarted.try_setup()
    again_stream, again = restarted.held[("grads", 0)]
    assert again_stream == stream and again.window == held.window == 0
    assert again.metadata() == held.metadata()
    assert restarted.line.state_window == 0


def test_a_replay_the_validator_itself_fails_bans_nobody(checked_world, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("out of memory (the validator's)")

    monkeypatch.setattr(replay_module, "train_inner", broken)
    holder, m1, m2, validator = roles(checked_world, Inflater)
    play(holder, [m1, m2], validator, 0)
    checks = records(validator, "check")
    assert {c["reason"] for c in checks} == {"inconclusive"} and len(checks) == 2
    assert not validator.checker.banned


class Withholder(Inflater):
    """Never reveals (it would see its name in the notice before its reveal)."""

    def send_reveal(self, sealed) -> bool:
        return False


def test_a_named_sender_that_withholds_its_upload_is_banned_past_the_grace(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world, Withholder)
    grace = checked_world.runtimes["v1"].cfg.protocol.scoring.check_grace
    for window in range(grace + 2):
        t = 10 * window
        for m in (m1, m2):
            run_at(m, t, t + 1)
        run_at(validator, t + 4, t + 5)
        run_at(m1, t + 6)
        run_at(m1, t + 7)
        run_at(validator, t + 7)
        run_at(holder, t + 8)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert (0, m2.rt.hotkey, "check_unrevealed") in {
        (c["window"], c["hotkey"], c["reason"]) for c in failed
    }
    assert m2.rt.hotkey in validator.checker.banned


def test_a_newcomer_claiming_a_history_it_does_not_have_fails(checked_world) -> None:
    holder, m1, m2, validator = roles(checked_world)
    play(holder, [m1], validator, 0)  # m2 sends nothing in window 0
    assert m2.try_setup()
    m2.line.ef.buffers = {
        n: torch.full_like(q.detach(), 1e-3) for n, q in m2.replica.model.named_parameters()
    }
    m2.line.state_window = 0  # "continues" an upload of window 0 that does not exist
    play(holder, [m1, m2], validator, 1)
    failed = [c for c in records(validator, "check") if not c["ok"]]
    assert [(c["hotkey"], c["reason"]) for c in failed] == [(m2.rt.hotkey, "check_broken_chain")]


def test_a_validator_restarted_after_its_notice_checks_whom_the_notice_named(
    world_with, monkeypatch
) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    world = world_with({"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"},
                       scoring={**ALL, "checks": 1})  # fmt: skip
    holder, m1, m2, validator = roles(world)
    for m in (m1, m2):
        run_at(m, 0, 1)
    assert run_at(validator, 4, 5) == 0  # the notice is out: one of the two is named
    (named,) = validator.checker.targets[0]
    for m in (m1, m2):
        run_at(m, 6)
        run_at(m, 7)
    again = Validator(world.runtimes["v1"])
    again.snapshot = validator.snapshot  # (a restart within the window keeps no snapshot)
    # Restarted, it would now name the other (the named one counts as verified first): it
    # must check whom its notice named, the one that answered.
    again.checker.ledger.verified = {named: 0}
    assert run_at(again, 5, 7) == 1
    assert again.checker.targets[0] == [named]
    assert [(c["hotkey"], c["ok"]) for c in records(again, "check")] == [(named, True)]


def test_a_sender_no_check_has_passed_is_not_paid_even_in_the_first_window(
    world_with, monkeypatch
) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    world = world_with({"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"},
                       scoring={**ALL, "checks": 1})  # fmt: skip
    holder, m1, m2, validator = roles(world)
    play(holder, [m1, m2], validator, 0)
    # Nobody was verified yet: the network's first window pays nobody (attackers that score
    # above honest miners there would otherwise be merged before any check).
    assert {why for why, _ in verdicts(validator).values()} == {"unverified"}
    assert all(score == 0.0 for _, score in verdicts(validator).values())
    (first,) = validator.checker.targets[0]
    assert set(validator.checker.verified) == {first}
    # One place a window, one of two senders verified: the verified group's share (half) is
    # drawn by the beacon. Until the other's check passes it is never paid; the first is.
    (second,) = {m1.rt.hotkey, m2.rt.hotkey} - {first}
    window = 1
    while second not in validator.checker.verified:
        assert window < 12, "the newcomer is checked in half the windows; 11 in a row is 1/2048"
        play(holder, [m1, m2], validator, window)
        got = verdicts(validator)
        assert got[second] == ["unverified", 0.0] or second in validator.checker.verified
        assert got[first][0] == "scored" and got[first][1] > 0.0
        window += 1
    play(holder, [m1, m2], validator, window)
    assert all(why != "unverified" for why, _ in verdicts(validator).values())  # both verified


def _notice(world, name: str, window: int, *verdicts) -> None:
    """``name``'s signed check notice for ``window``, written by hand (a validator that lies)."""
    rt = world.runtimes[name]
    publish_envelope(rt.store, signer=rt.signer, run=rt.cfg.protocol.run, kind=ObjectKind.CHECKS,
                     window=window, tensors={}, lane=notice_lane(rt), plan=rt.plan.digest,
                     metadata=CheckNotice(verdicts=tuple(verdicts)).wire())  # fmt: skip


def test_a_validator_that_claims_an_honest_miner_failed_is_contradicted_and_then_ignored(
    world_with, monkeypatch
) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "v2": "validator", "m1": "miner", "m2": "miner"}
    world = world_with(names, scoring=ALL)
    holder, m1, m2, validator = roles(world)
    liar, honest = world.runtimes["v2"].hotkey, m1.rt.hotkey
    play(holder, [m1, m2], validator, 0)
    assert honest in validator.checker.verified  # its own check of window 0 passed
    # v2's notice of window 1 says m1's upload of window 0 failed: v1 replays it (a
    # confirmation), finds it honest, keeps m1 and ignores v2's claims from then on.
    _notice(world, "v2", 1, CheckVerdict(0, honest, "check_mismatch", 0.5))
    play(holder, [m1, m2], validator, 1)
    confirmations = [r for r in records(validator, "check") if r["claimant"] == liar]
    assert [(r["window"], r["hotkey"], r["ok"]) for r in confirmations] == [(0, honest, True)]
    assert honest not in validator.checker.banned and verdicts(validator)[honest][0] == "scored"
    assert validator.checker.distrust[liar] > 1
    # Its passes count for nothing now either: they would end a newcomer's probation.
    stranger = world.runtimes["holder"].hotkey
    _notice(world, "v2", 2, CheckVerdict(1, stranger, "pass", 0.0))
    play(holder, [m1, m2], validator, 2)
    assert stranger not in validator.checker.verified


def test_a_notice_that_vouches_for_a_window_not_yet_checked_is_refused_whole(
    world_with, monkeypatch
) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "v2": "validator", "m1": "miner", "m2": "miner"}
    world = world_with(names, scoring=ALL)
    holder, m1, m2, validator = roles(world)
    stranger, vouched = world.runtimes["holder"].hotkey, m2.rt.hotkey
    # v2's notice of window 0 vouches for a hotkey far ahead (until window 999999999999) and,
    # beside it, for m2 in window 0 itself: one signed notice, refused whole.
    _notice(world, "v2", 0, CheckVerdict(0, vouched, "pass", 0.0),
            CheckVerdict(999_999_999_999, stranger, "pass", 0.0))  # fmt: skip
    play(holder, [m1, m2], validator, 0)
    assert stranger not in validator.checker.verified
    refused = records(validator, "notice_refused")
    assert [(r["window"], r["reason"]) for r in refused] == [(0, "check_bad_notice")]
    assert "999999999999" in refused[0]["detail"]


def test_another_validators_pass_verifies_nobody_here(world_with, monkeypatch) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "v2": "validator", "m1": "miner", "m2": "miner"}
    world = world_with(names, scoring={**ALL, "checks": 1})
    holder, m1, m2, validator = roles(world)
    # v2 says both miners' uploads of window 0 passed, in a notice of window 0 (a valid one)
    _notice(world, "v2", 0, CheckVerdict(0, m1.rt.hotkey, "pass", 0.0),
            CheckVerdict(0, m2.rt.hotkey, "pass", 0.0))  # fmt: skip
    play(holder, [m1, m2], validator, 0)
    assert not records(validator, "notice_refused")  # read, and
    (checked,) = validator.checker.targets[0]
    assert set(validator.checker.verified) == {checked}  # only v1's own check verified
    (other,) = {m1.rt.hotkey, m2.rt.hotkey} - {checked}
    play(holder, [m1, m2], validator, 1)
    # scored in window 1 before any check of v1's own passed it: still on probation here
    assert verdicts(validator)[other] == ["unverified", 0.0]


def test_the_passes_of_two_other_validators_verify_a_sender_here(world_with, monkeypatch) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "v2": "validator", "v3": "validator",
             "m1": "miner", "m2": "miner"}  # fmt: skip
    world = world_with(names, scoring={**ALL, "checks": 1})
    holder, m1, m2, validator = roles(world)
    one, two = m1.rt.hotkey, m2.rt.hotkey
    _notice(world, "v2", 0, CheckVerdict(0, one, "pass", 0.0), CheckVerdict(0, two, "pass", 0.0))
    _notice(world, "v3", 0, CheckVerdict(0, two, "pass", 0.0))
    play(holder, [m1, m2], validator, 0)
    own = set(validator.checker.verified)  # what v1's own check passed
    assert two in validator.checker.trusted  # two others' passes: a quorum
    assert (one in validator.checker.trusted) == (one in own)  # one other's alone: nothing
