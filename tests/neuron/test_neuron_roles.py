"""Miner, Validator and ModelHolder steps, run by the one loop on manual clocks, in memory.

One window of the scored subnet end to end: the holder publishes the dataset and version 0, two
miners train and upload on the ``grads`` lane, the validator scores them and reports on the
``scores`` lane, the holder merges and publishes version 1, which a miner then syncs to.
"""

from __future__ import annotations

import functools

import pytest
from neuron_ticks import records, run_at

import subnet.neuron.validator as validator_module
from subnet.config import ConfigError
from subnet.data import random_sample_ids
from subnet.neuron.commits import Sealed
from subnet.neuron.holder import MergeResult, ModelHolder
from subnet.neuron.miner import Miner, Upload
from subnet.neuron.validator import ScoreReport, Validator
from subnet.storage.keys import ObjectKind, object_key
from subnet.wire import envelope_header


def test_one_window_flows_through_every_role(world, monkeypatch):
    # The validator evaluates all 4 assigned samples (eval_samples 4) and, here, a seeded set of
    # random ones: the plumbing is under test, so the scores must not vary from run to run.
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    run_key = world.runtimes["holder"].cfg.protocol.run
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup() and holder.version == 0  # dataset and version 0 are out
    miners = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    results = {}
    for miner in miners:
        original = miner.actions["train"]
        miner.actions = {**miner.actions, "train": lambda self, st, f=original: results.setdefault(
            self.rt.hotkey, f(self, st))}  # fmt: skip
        assert run_at(miner, 0) == 0  # committed; the reveal waits for the deadline
    validator = Validator(world.runtimes["v1"])
    assert run_at(validator, 4) == 0  # read the commits on the deadline tick; waits for reveals
    for miner in miners:
        upload = results[miner.rt.hotkey]
        assert isinstance(upload, Upload) and miner.sealed["grads"].window == 0
        header = envelope_header(miner.sealed["grads"].blob)
        assert header.plan == miner.rt.plan.digest  # the plan travels in the signed header
        assert upload.key == object_key(run_key, ObjectKind.GRADIENT, 0, miner.rt.hotkey,
                                        lane="grads")  # fmt: skip
        store = world.stores[_name(world, miner.rt.hotkey)]
        commit = object_key(run_key, ObjectKind.GRADIENT_COMMIT, 0, miner.rt.hotkey, lane="grads")
        assert store.head(commit) and upload.key not in {
            i.key for i in store.list()
        }  # no payload yet
        assert run_at(miner, 6) == 1  # the reveal, after a guard tick
        assert store.head(upload.key)

    assert run_at(validator, 6) == 1
    scored = records(validator.rt, "scores")[-1]
    assert {hk: v[0] for hk, v in scored["verdicts"].items()} == {
        world.hotkey("m1"): "scored", world.hotkey("m2"): "scored"}  # fmt: skip
    # The measurements behind each score are in the record too (to audit a validator's pay).
    measured = scored["measured"]
    assert set(measured) == {world.hotkey("m1"), world.hotkey("m2")}
    assert all(m["assigned"] is not None and m["se"] is not None for m in measured.values())
    # Each measured sender's track record has this window's gain ratio; it is saved and restored.
    assert set(scored["record"]) == set(measured)
    assert {hk: len(v) for hk, v in validator.book.records.items()} == dict.fromkeys(measured, 1)
    meta, tensors = validator.state()
    twin = Validator(world.runtimes["v1"])
    assert twin.try_setup()
    twin.restore(meta, tensors)
    assert twin.book.records == validator.book.records and twin.book.moving == validator.book.moving
    report = object_key(run_key, ObjectKind.SCORES, 0, world.hotkey("v1"), lane="scores")
    assert world.stores["v1"].head(report)
    assert world.runtimes["v1"].weights.offers[-1] == validator.book.moving

    assert run_at(holder, 8) == 1
    version = records(holder.rt, "version")[-1]
    assert version["version"] == 1 and version["window"] == 0
    # Merged: exactly the uploads the report paid (a score of 0 proves no work, never merged).
    paid = {hk for hk, v in scored["verdicts"].items() if v[1] > 0}
    assert paid and set(version["contributors"]) == paid
    assert version["reports"] == 1

    run_at(miners[0], 10)  # window 1: the version_out gate passes, the miner syncs to v1
    assert miners[0].replica.version == 1


def test_steps_return_typed_results(world, monkeypatch):
    # Seeded random samples, as above: with one upload the own-data proof of an unseeded draw
    # can fail by chance, and then there is nothing to merge.
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    holder = ModelHolder(world.runtimes["holder"])
    holder.try_setup()
    miner = Miner(world.runtimes["m1"])
    miner.try_setup()
    from subnet.neuron.steps import Step

    train, reveal = world.runtimes["m1"].plan.slot("miner").steps
    assert isinstance(miner.handle(Step(train, 0, 0)), Upload)
    validator = Validator(world.runtimes["v1"])
    validator.try_setup()
    validator.observe(4, 0, 4)  # the commit snapshot, on the deadline tick
    assert isinstance(miner.handle(Step(reveal, 0, 6)), Sealed)
    score = world.runtimes["v1"].plan.slot("validator").steps[0]
    got = validator.handle(Step(score, 0, 6))
    assert isinstance(got, ScoreReport) and set(got.scores) == {world.hotkey("m1"),
                                                               world.hotkey("m2")}  # fmt: skip
    assert (
        got.scores[world.hotkey("m2")] == 0.0
        and got.verdicts[world.hotkey("m2")].reason == "missing"
    )
    merge = world.runtimes["holder"].plan.slot("holder").steps[0]
    merged = holder.handle(Step(merge, 0, 8))
    assert isinstance(merged, MergeResult) and merged.merged
    assert list(merged.weights) == [world.hotkey("m1")]


def test_a_miner_waits_for_the_holders_dataset(world):
    miner = Miner(world.runtimes["m1"])
    assert not miner.try_setup()  # the holder has not published the dataset: retried later
    assert not miner.ready


def test_a_holder_outside_the_holder_slot_refuses_to_start(world_with):
    world = world_with({"holder": "miner", "v1": "validator", "m1": "holder", "m2": "miner"})
    with pytest.raises(ConfigError, match="does not fill slot holder"):
        ModelHolder(world.runtimes["holder"])


def test_reports_count_only_from_members_allowed_to_score(world):
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.trusted() == {world.hotkey("v1")}


def _name(world, hotkey: str) -> str:
    return next(n for n in world.keys if world.hotkey(n) == hotkey)


def test_the_same_roles_run_diloco_from_its_spec(world_with):
    """No scorers, every worker waited for (``all_uploads``), equal weights, Nesterov outer
    step, and the stop rule after two rounds: all from ``topologies/diloco.toml``."""
    from subnet.topology import Template

    template = Template(topology="@beam/diloco@1.0.0", params={"rounds": 2})
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, template)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup() and lead.scores is None and lead.outer.momentum == 0.9
    workers = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    for window in (0, 1):
        assert not lead.finished()
        for worker in workers:
            assert run_at(worker, 10 * window) == 1
        assert run_at(lead, 10 * window + 6) == 1
    versions = records(lead.rt, "version")
    assert [v["version"] for v in versions] == [0, 1, 2]
    halves = {world.hotkey("m1"): 0.5, world.hotkey("m2"): 0.5}
    assert all(v["contributors"] == halves and v["reports"] == 0 for v in versions[1:])
    assert lead.finished()  # stop: rounds = 2


def test_all_uploads_holds_the_lead_until_every_worker_sent(world_with):
    from subnet.neuron.steps import Step
    from subnet.topology import Template

    template = Template(topology="@beam/diloco@1.0.0")
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, template)
    lead = ModelHolder(world.runtimes["holder"])
    lead.try_setup()
    merge = lead.slot.steps[0]
    assert merge.gates == ("all_uploads",)
    worker = Miner(world.runtimes["m1"])
    run_at(worker, 0)
    assert lead.schedule.held_by(Step(merge, 0, 6), 9, lead) == "all_uploads"  # m2 is missing
    assert lead.schedule.held_by(Step(merge, 0, 9), 9, lead) is None  # lapsed: merge what is in
