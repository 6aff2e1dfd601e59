"""Failures stay with their sender: a peer message whose handling raises, in any step that reads
many peers (a validator's scoring, a holder's merge and its reports, a tree reduce, a ring mix,
grants, consensus), refuses that message with a reason and the step goes on for the others.

The raising message is made by a hostile bucket (a reader that fails as no storage code
expects) or by a consumer that raises on one sender's message, as a bug or an unforeseen input
would; everything else is the real roles on the in-memory world (``tests/neuron/conftest.py``).
"""

from __future__ import annotations

import functools

import pytest
import torch
from neuron_ticks import records, run_at

import subnet.neuron.uploads as uploads_module
import subnet.neuron.validator as validator_module
from subnet.data import random_sample_ids
from subnet.neuron.actions.grants import grants_for
from subnet.neuron.actions.signed import put_message
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.uploads import Received
from subnet.neuron.validator import ScoreReport, Validator
from subnet.storage.keys import ObjectKind
from subnet.topology import Template
from subnet.wire import GrantMeta, Reason, envelope_header


class Exploding:
    """A hostile bucket whose every read fails in a way no storage code expects."""

    def get(self, key, max_bytes):
        raise KeyError("ContentLength")

    def head(self, key):
        raise KeyError("ContentLength")


class Lying:
    """A hostile bucket that shows its objects (a HEAD answers) but fails every read."""

    def __init__(self, store) -> None:
        self.store = store

    def head(self, key):
        return self.store.head(key)

    def get(self, key, max_bytes):
        raise KeyError("ContentLength")


def raising_for(monkeypatch, target, name: str, sha256: str) -> None:
    """``target.name(payload, shapes)`` raises for the payload whose envelope has ``sha256``
    (each payload is known by its envelope as the reader accepts it: ``uploads._accept``)."""
    original = getattr(target, name)
    seen: dict[int, str] = {}

    def patched(payload, shapes):
        if seen.get(id(payload)) == sha256:
            raise RuntimeError("a message nothing foresaw")
        return original(payload, shapes)

    monkeypatch.setattr(target, name, patched)
    original_accept = uploads_module._accept

    def accept(rt, envelope, *args, **kwargs):
        seen[id(envelope.tensors)] = envelope.header.payload_sha256
        return original_accept(rt, envelope, *args, **kwargs)

    monkeypatch.setattr(uploads_module, "_accept", accept)


def scored_subnet_window(world, monkeypatch):
    """The scored subnet up to the reveal: the holder's version 0, two miners' reveals, and the
    validator's commit snapshot (it scores at tick 6)."""
    monkeypatch.setattr(
        validator_module, "random_sample_ids", functools.partial(random_sample_ids, seed=0)
    )
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miners = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    for miner in miners:
        assert run_at(miner, 0) == 0
    validator = Validator(world.runtimes["v1"])
    assert run_at(validator, 4) == 0
    digests = {}
    for miner in miners:
        digests[miner.rt.hotkey] = envelope_header(miner.sealed["grads"].blob).payload_sha256
        assert run_at(miner, 6) == 1
    return holder, validator, digests


def test_a_validator_refuses_the_upload_whose_handling_raises_and_scores_the_rest(
    world, monkeypatch
):
    holder, validator, digests = scored_subnet_window(world, monkeypatch)
    bad, good = world.hotkey("m1"), world.hotkey("m2")
    raising_for(monkeypatch, validator.compressor, "measure", digests[bad])
    assert run_at(validator, 6) == 1  # the window is scored, not failed
    assert records(validator.rt, "window_failed") == []
    verdicts = records(validator.rt, "scores")[-1]["verdicts"]
    assert verdicts[bad] == ["rejected", 0.0] and verdicts[good][0] == "scored"
    assert records(validator.rt, "scores")[-1]["details"][bad] == Reason.UNREADABLE.value


def test_a_holder_refuses_the_upload_whose_handling_raises_and_merges_the_rest(world, monkeypatch):
    holder, validator, digests = scored_subnet_window(world, monkeypatch)
    assert run_at(validator, 6) == 1
    paid = sorted(hk for hk, v in records(validator.rt, "scores")[-1]["verdicts"].items() if v[1])
    assert paid  # the merge below has something to merge
    good = paid[0]
    bad = next(hk for hk in digests if hk != good)
    raising_for(monkeypatch, holder.compressor, "norm", digests[bad])
    assert run_at(holder, 8) == 1
    assert records(holder.rt, "window_failed") == []
    uploads = records(holder.rt, "uploads")[-1]
    assert uploads["verdicts"][bad] == "rejected:unreadable"
    assert uploads["merged"] == [good] and holder.version == 1


def test_a_report_whose_reading_raises_costs_only_its_validator(world_with):
    """Consensus: one validator's hostile bucket; the median of the other two is published."""
    template = Template(topology="@beam/subnet@1.0.0")
    names = {
        "holder": "holder",
        "c": "consensus",
        "v1": "validator",
        "v2": "validator",
        "v3": "validator",
        "m1": "miner",
        "m2": "miner",
    }
    world = world_with(names, template)
    cons = ModelHolder(world.runtimes["c"])
    assert ModelHolder(world.runtimes["holder"]).try_setup() and cons.try_setup()
    m1, m2 = world.hotkey("m1"), world.hotkey("m2")
    reports = {"v1": (0.3, 0.1), "v2": (0.5, 0.1), "v3": (0.0, 0.9)}
    for name, (a, b) in reports.items():
        validator = Validator(world.runtimes[name])
        assert validator.try_setup()
        validator.publish(0, ScoreReport(0, validator.replica.version, {m1: a, m2: b}))
    world.runtimes["c"].readers.stores[world.hotkey("v3")] = Exploding()
    assert run_at(cons, 6) == 1
    assert records(cons.rt, "window_failed") == []
    consensus = records(cons.rt, "consensus")[-1]
    assert consensus["validators"] == sorted([world.hotkey("v1"), world.hotkey("v2")])
    assert consensus["weights"] == pytest.approx({m1: 0.8, m2: 0.2})  # medians 0.4 and 0.1


def test_a_tree_child_whose_partial_raises_is_left_out_and_the_rest_goes_up(
    world_with, monkeypatch
):
    template = Template(
        topology="@beam/fedavg@1.0.0", params={"workers": 3, "fanout": 2, "local_steps": 2}
    )
    world = world_with(
        {"holder": "lead", "m1": "worker", "m2": "worker", "m3": "worker"},
        template,
        compression={"name": "dense-fp32"},
    )
    assert ModelHolder(world.runtimes["holder"]).try_setup()
    workers = sorted(
        (Miner(world.runtimes[n]) for n in ("m1", "m2", "m3")), key=lambda m: m.rt.hotkey
    )
    for worker in workers:
        run_at(worker, 0)
    for worker in reversed(workers[1:]):
        assert run_at(worker, 4) == 1  # the leaves send their partials up
    root, bad = workers[0], workers[1].rt.hotkey
    decode = Received.decode

    def hostile(self):
        if self.hotkey == bad:
            raise RuntimeError("a partial nothing foresaw")
        return decode(self)

    monkeypatch.setattr(Received, "decode", hostile)
    assert run_at(root, 4) == 1  # the root still reduces and sends up
    assert records(root.rt, "window_failed") == []
    reduced = records(root.rt, "reduce")[-1]
    assert reduced["children"] == {workers[2].rt.hotkey: 1} and reduced["members"] == 2


def test_a_ring_predecessor_whose_model_raises_costs_the_mix_only(world_with):
    template = Template(
        topology="@beam/gossip-ring@1.0.0",
        params={"workers": 2, "local_steps": 2, "mix": 0.5, "rounds": 2},
    )
    world = world_with(
        {"holder": "collector", "m1": "worker", "m2": "worker"},
        template,
        compression={"name": "dense-fp32"},
    )
    assert ModelHolder(world.runtimes["holder"]).try_setup()
    m1, m2 = Miner(world.runtimes["m1"]), Miner(world.runtimes["m2"])
    for worker in (m1, m2):
        run_at(worker, 0)
    own = {k: v.clone() for k, v in m1.replica.state.items()}  # our model after training
    world.runtimes["m1"].readers.stores[m2.rt.hotkey] = Lying(m2.rt.store)
    assert run_at(m1, 4) == 1
    assert records(m1.rt, "window_failed") == []
    assert records(m1.rt, "mix")[-1]["weight"] == 0.0  # ours kept, the round goes on
    assert set(m1.replica.state) == set(own)
    assert all(torch.isfinite(t).all() for t in m1.replica.state.values())


def test_a_grantor_whose_bucket_raises_grants_nothing_and_the_reader_goes_on(world_with):
    template = Template(
        topology="@beam/elastic-diloco@1.0.0",
        params={"inner_steps": 2, "units_per_worker": 2, "rounds": 3},
    )
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, template)
    lead, m1 = world.runtimes["holder"], world.runtimes["m1"]
    put_message(lead, ObjectKind.DATA_GRANT, 3, "grants", GrantMeta(grants={m1.hotkey: (4, 5)}))
    assert grants_for(m1, 3) == {m1.hotkey: [4, 5]}
    m1.readers.stores[lead.hotkey] = Exploding()
    assert grants_for(m1, 3) == {}  # refused (logged), not raised: the gate simply waits


def test_a_gate_that_reads_a_hostile_bucket_waits_and_never_raises(world_with):
    """Gates read peers' buckets too (``predecessor_in``, ``objects_present``): a bucket that
    fails the look holds nothing for now, and the step waits for its lapse."""
    template = Template(
        topology="@beam/gossip-ring@1.0.0",
        params={"workers": 2, "local_steps": 2, "mix": 0.5, "rounds": 2},
    )
    world = world_with(
        {"holder": "collector", "m1": "worker", "m2": "worker"},
        template,
        compression={"name": "dense-fp32"},
    )
    assert ModelHolder(world.runtimes["holder"]).try_setup()
    m1, m2 = Miner(world.runtimes["m1"]), Miner(world.runtimes["m2"])
    for worker in (m1, m2):
        run_at(worker, 0)
    world.runtimes["m1"].readers.stores[m2.rt.hotkey] = Exploding()
    run_at(m1, 4)  # returns: the gate did not pass, nothing raised
    assert records(m1.rt, "mix") == [] and records(m1.rt, "window_failed") == []
