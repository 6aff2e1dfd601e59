"""Audits of training through the real roles, in memory on manual clocks that give a beacon.

Window ticks (``conftest``): upload ``[0, 4)``, snapshot on tick 4, reveals from 6, score
``[4, 8)``, merge from 8; the next window starts at 10. With ``audit_fraction = 1`` every upload
is audited: the validator replays each one and logs an ``audit`` record.
"""

from __future__ import annotations

import functools
import json

import pytest
import torch

import subnet.neuron.validator as validator_module
from subnet.clock import ManualClock
from subnet.data import random_sample_ids
from subnet.neuron.audit import FRESH, STATE_FROM, STATE_IN, STATE_OUT, capture, state_digest
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner, Upload, WindowSkipped
from subnet.neuron.validator import Validator
from subnet.storage.keys import ObjectKind, object_key


class BeaconClock(ManualClock):
    """A manual clock with a beacon (a chain's block hash stands there in subnet mode)."""

    def beacon(self, tick: int) -> str:
        return f"beacon-{tick}"


def run_at(neuron, *ticks: int) -> int:
    neuron.rt.clock = BeaconClock(list(ticks))
    return neuron.run(max_windows=1)


def records(neuron, event: str) -> list[dict]:
    lines = neuron.rt.metrics.path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


def verdicts(validator) -> dict[str, list]:
    return records(validator, "scores")[-1]["verdicts"]


class Inflater(Miner):
    """Trains honestly and sends twice its update (the metadata it commits stays honest)."""

    def step(self, window: int) -> Upload:
        honest = super().step(window)
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        delta = self.compressor.decode(honest.payload, shapes)
        return Upload(self.compressor.encode({k: 2 * v for k, v in delta.items()}),
                      honest.metadata)  # fmt: skip


class Mute(Miner):
    """Never writes its training states, audited or not."""

    def answer_audit(self, sealed) -> None:
        return None


@pytest.fixture
def audited_world(world_with, monkeypatch):
    """Holder, validator and two miners with every upload audited."""
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"}
    return world_with(names, scoring={"audit_fraction": 1.0})


def play(world, holder, miners, validator, window: int) -> None:
    """One window through every role."""
    t = 10 * window  # run_at: the windows each run finished
    for m in miners:
        assert run_at(m, t) == 0
    assert run_at(validator, t + 4) == 0
    for m in miners:
        assert run_at(m, t + 6) == 1
    assert run_at(validator, t + 6) == 1
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


def test_honest_uploads_pass_their_audits_window_after_window(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world)
    for window in (0, 1):
        play(audited_world, holder, [m1, m2], validator, window)
        got = verdicts(validator)
        assert {got[m.rt.hotkey][0] for m in (m1, m2)} == {"scored"}
    audits = records(validator, "audit")
    assert len(audits) == 4 and all(a["ok"] for a in audits)
    assert all(a["error"] == 0.0 for a in audits)  # one machine: the replay is bit for bit
    # The second window continued the first one's committed state.
    blob = audited_world.stores["m1"].get(
        object_key("beam", ObjectKind.GRADIENT, 1, m1.rt.hotkey, lane="grads"), 10**8
    )
    from tests.neuron.test_commit_reveal import _metadata

    meta = _metadata(blob)
    first = _metadata(
        audited_world.stores["m1"].get(
            object_key("beam", ObjectKind.GRADIENT, 0, m1.rt.hotkey, lane="grads"), 10**8
        )
    )
    assert first[STATE_IN] == FRESH and first[STATE_FROM] == ""
    assert meta[STATE_FROM] == "0" and meta[STATE_IN] == first[STATE_OUT] != FRESH


def test_an_inflated_update_fails_its_audit_and_its_sender_stays_banned(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world, Inflater)
    play(audited_world, holder, [m1, m2], validator, 0)
    got = verdicts(validator)
    assert got[m1.rt.hotkey][0] == "scored"
    assert got[m2.rt.hotkey] == ["rejected", 0.0]
    failed = [a for a in records(validator, "audit") if not a["ok"]]
    assert [(a["hotkey"], a["reason"]) for a in failed] == [(m2.rt.hotkey, "audit_mismatch")]
    assert "update differs" in failed[0]["detail"]
    merged = records(holder, "merge")[-1] if records(holder, "merge") else None
    if merged is not None and "weights" in merged:
        assert merged["weights"].get(m2.rt.hotkey, 0.0) == 0.0
    play(audited_world, holder, [m1, m2], validator, 1)
    assert verdicts(validator)[m2.rt.hotkey] == ["rejected", 0.0]
    assert records(validator, "scores")[-1]["details"][m2.rt.hotkey] == "audit_banned"
    assert records(validator, "scores")[-1]["moving"].get(m2.rt.hotkey, 0.0) == 0.0
    # A restarted validator keeps the ban.
    again = Validator(audited_world.runtimes["v1"])
    assert again.try_setup() and m2.rt.hotkey in again.auditor.banned


def test_a_state_that_does_not_continue_the_committed_one_fails(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world)
    play(audited_world, holder, [m1, m2], validator, 0)
    # m2 biases its error feedback between windows: a state no upload committed to.
    for name, buffer in m2.line.ef.buffers.items():
        m2.line.ef.buffers[name] = buffer + 0.01
    play(audited_world, holder, [m1, m2], validator, 1)
    failed = [a for a in records(validator, "audit") if not a["ok"]]
    assert [(a["window"], a["hotkey"], a["reason"]) for a in failed] == [
        (1, m2.rt.hotkey, "audit_broken_chain")
    ]
    assert verdicts(validator)[m1.rt.hotkey][0] == "scored"


def test_an_audited_sender_that_withholds_its_states_fails(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world, Mute)
    play(audited_world, holder, [m1, m2], validator, 0)
    failed = [a for a in records(validator, "audit") if not a["ok"]]
    assert [(a["hotkey"], a["reason"]) for a in failed] == [(m2.rt.hotkey, "audit_no_state")]


def test_without_a_beacon_nothing_is_audited(world_with, monkeypatch) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    world = world_with({"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"},
                       scoring={"audit_fraction": 1.0})  # fmt: skip
    holder, m1, m2, validator = roles(world, Inflater)
    for m in (m1, m2):
        m.rt.clock = ManualClock([0])
        assert m.run(max_windows=1) == 0
    validator.rt.clock = ManualClock([4])
    assert validator.run(max_windows=1) == 0
    for m in (m1, m2):
        m.rt.clock = ManualClock([6])
        assert m.run(max_windows=1) == 1
    validator.rt.clock = ManualClock([6])
    assert validator.run(max_windows=1) == 1
    assert records(validator, "audit") == []
    keys = [info.key for info in world.stores["m1"].list("beam/")]
    assert keys and not [k for k in keys if "/train-state/" in k]


def test_a_skipped_window_leaves_the_training_state_as_it_was(world) -> None:
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miner = Miner(world.runtimes["m1"])
    assert run_at(miner, 0) == 0  # one honest window: moments and error feedback exist
    line = miner.line
    before = state_digest(capture(line.optimizer, line.ef))

    class Abandon:
        def train(self, *args, **kwargs):
            for group in line.optimizer.state.values():  # the abandoned steps moved them
                for value in group.values():
                    if torch.is_tensor(value):
                        value.add_(1.0)
            raise WindowSkipped("too slow")

    miner.pacer = Abandon()
    with pytest.raises(WindowSkipped):
        miner.step(1)
    assert state_digest(capture(miner.line.optimizer, miner.line.ef)) == before


def test_a_restart_after_the_commit_keeps_the_states_an_audit_needs(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world)
    assert run_at(m1, 0) == 0
    held = m1.held["grads"][1]
    restarted = Miner(audited_world.runtimes["m1"])
    assert restarted.try_setup()
    stream, again = restarted.held["grads"]
    assert stream == m1.line.stream and again.window == held.window == 0
    assert again.metadata() == held.metadata()
    assert restarted.line.state_window == 0


def test_audits_that_do_not_fit_before_the_report_run_after_it(audited_world) -> None:
    """A validator scoring late in its phase (tick 7: past the middle of [reveal_by 7, report
    8)) reports first and replays after; the liar is banned from the next window on."""
    holder, m1, m2, validator = roles(audited_world, Inflater)
    for m in (m1, m2):
        assert run_at(m, 0) == 0
    assert run_at(validator, 4) == 0
    for m in (m1, m2):
        assert run_at(m, 6) == 1
    assert run_at(validator, 7) == 1
    assert verdicts(validator)[m2.rt.hotkey][0] != "rejected"  # reported before the replay
    audits = records(validator, "audit")
    assert {a["hotkey"]: (a["ok"], a["deferred"]) for a in audits} == {
        m1.rt.hotkey: (True, True),
        m2.rt.hotkey: (False, True),
    }
    assert m2.rt.hotkey in validator.auditor.banned
    assert run_at(holder, 8) == 1
    play(audited_world, holder, [m1, m2], validator, 1)
    assert records(validator, "scores")[-1]["details"][m2.rt.hotkey] == "audit_banned"


class BlindClock(ManualClock):
    """A chain clock whose beacon read failed."""

    def beacon(self, tick: int) -> None:
        return None


def test_a_miner_that_cannot_read_the_beacon_writes_its_states_anyway(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world)
    m1.rt.clock = BlindClock([0])
    assert m1.run(max_windows=1) == 0
    m1.rt.clock = BlindClock([6])
    assert m1.run(max_windows=1) == 1
    keys = [info.key for info in audited_world.stores["m1"].list("beam/")]
    assert [k for k in keys if "/train-state/" in k], keys


def test_a_fresh_state_is_always_audited_and_a_continued_one_only_when_drawn(
    world_with, monkeypatch
) -> None:
    """Probation: an upload trained from a fresh state (a new sender, or one that started over)
    is audited whatever the draw; later ones only when the beacon draws them."""
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    world = world_with({"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"},
                       scoring={"audit_fraction": 1e-12})  # fmt: skip
    holder, m1, m2, validator = roles(world)
    play(world, holder, [m1, m2], validator, 0)
    assert {a["hotkey"] for a in records(validator, "audit")} == {m1.rt.hotkey, m2.rt.hotkey}
    play(world, holder, [m1, m2], validator, 1)
    assert len(records(validator, "audit")) == 2  # nothing drawn in window 1
    assert {v[0] for v in verdicts(validator).values()} == {"scored"}


class Withholder(Inflater):
    """Never reveals an upload it knows is drawn for audit (the beacon is out before reveals)."""

    def send_reveal(self, sealed) -> bool:
        return False


def _window0_without(world, holder, validator, present, absent) -> None:
    """Window 0 with ``absent`` committing but not revealing in time (it is not run at 6)."""
    for m in (*present, absent):
        assert run_at(m, 0) == 0
    assert run_at(validator, 4) == 0
    for m in present:
        assert run_at(m, 6) == 1
    assert run_at(validator, 6, 7) == 1  # waits for the reveal it lacks until reveal_by
    assert run_at(holder, 8) == 1


def test_a_drawn_sender_that_withholds_its_upload_is_banned_a_window_later(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world, Withholder)
    _window0_without(audited_world, holder, validator, [m1], m2)
    assert verdicts(validator)[m2.rt.hotkey][0] == "missing"
    assert validator.auditor.owed[m2.rt.hotkey].window == 0
    assert run_at(m1, 10) == 0 and run_at(m2, 10) == 0
    assert run_at(validator, 14) == 0
    assert run_at(m1, 16) == 1 and run_at(m2, 16) == 1
    assert run_at(validator, 16, 17) == 1  # settles window 0's owed audit first
    failed = [a for a in records(validator, "audit") if not a["ok"]]
    assert [(a["window"], a["hotkey"], a["reason"]) for a in failed] == [
        (0, m2.rt.hotkey, "audit_unrevealed")
    ]
    assert m2.rt.hotkey in validator.auditor.banned


def test_an_honest_miner_that_missed_its_reveal_reveals_late_and_passes(audited_world) -> None:
    holder, m1, m2, validator = roles(audited_world)
    _window0_without(audited_world, holder, validator, [m2], m1)
    assert m1.rt.hotkey in validator.auditor.owed
    play(audited_world, holder, [m1, m2], validator, 1)  # m1 reveals window 0 before training
    audits = records(validator, "audit")
    assert all(a["ok"] for a in audits), audits
    late = [a for a in audits if a["hotkey"] == m1.rt.hotkey and a["window"] == 0]
    assert len(late) == 1 and late[0]["deferred"]  # the owed audit, a window later
    assert verdicts(validator)[m1.rt.hotkey][0] == "scored"  # its chain continued window 0
    assert not validator.auditor.banned


def test_a_replay_the_validator_itself_fails_bans_nobody(audited_world, monkeypatch) -> None:
    import subnet.neuron.audit as audit_module

    def broken(*args, **kwargs):
        raise RuntimeError("out of memory (the validator's)")

    monkeypatch.setattr(audit_module, "train_inner", broken)
    holder, m1, m2, validator = roles(audited_world, Inflater)
    play(audited_world, holder, [m1, m2], validator, 0)
    audits = records(validator, "audit")
    assert {a["reason"] for a in audits} == {"inconclusive"} and len(audits) == 2
    assert not validator.auditor.banned
    assert verdicts(validator)[m1.rt.hotkey][0] == "scored"


def test_a_newcomer_claiming_a_history_it_does_not_have_fails_at_once(audited_world) -> None:
    """Probation cannot be dodged by naming a made-up earlier state: the link is read from the
    upload it names, audited or not."""
    holder, m1, m2, validator = roles(audited_world)
    play(audited_world, holder, [m1], validator, 0)  # m2 sends nothing in window 0
    assert run_at(m1, 10) == 0
    assert m2.try_setup()
    m2.line.ef.buffers = {
        n: torch.full_like(q.detach(), 1e-3) for n, q in m2.replica.model.named_parameters()
    }
    m2.line.state_window = 0  # "continues" an upload of window 0 that does not exist
    assert run_at(m2, 10) == 0
    assert run_at(validator, 14) == 0
    for m in (m1, m2):
        assert run_at(m, 16) == 1
    assert run_at(validator, 16) == 1
    failed = [a for a in records(validator, "audit") if not a["ok"]]
    # broken_chain, not a replay's verdict: the link alone decided, before any training
    assert [(a["hotkey"], a["reason"]) for a in failed] == [(m2.rt.hotkey, "audit_broken_chain")]
