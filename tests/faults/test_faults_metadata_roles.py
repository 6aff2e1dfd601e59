"""Hostile metadata through the real roles: a scored window (the validator's scoring and checks
claims, the holder's reports and merge) and a tree reduce, with miners whose signed metadata is
at the edge of what the schema accepts, or past it.

Each miner signs its own upload (commit-reveal included), so what the readers see is exactly
what a hostile miner can send; the unit-level fuzzers are in ``test_faults_metadata.py``.
"""

from __future__ import annotations

import functools
import math

from neuron_ticks import records, run_at

import subnet.neuron.validator as validator_module
from subnet.data import random_sample_ids
from subnet.neuron.holder import ModelHolder
from subnet.neuron.lanes import Outbox
from subnet.neuron.miner import Miner
from subnet.neuron.validator import Validator
from subnet.topology import Template
from subnet.wire.reasons import is_code

# Accepted by the schema, at its bounds (the readers must still refuse or use them safely)
EDGES = [
    {"tokens": "999999999999", "loss": "999999.999999", "steps": "0"},
    {"loss": "0.000000", "members": "1048576", "subtree_samples": "999999999999"},
    {"state_in": "fresh", "state_from": "", "state_out": "f" * 64},
]
# Refused by the schema, each with its reason
PAST = [
    ({"loss": "NaN"}, "bad_metadata"),
    ({"state_from": "²"}, "check_malformed"),
    ({"samples": "1e3"}, "bad_metadata"),
    ({"receipt": "a" * 64 + "\n"}, "bad_receipt"),
    ({"members": "0"}, "bad_metadata"),
    ({"plan": "0123456789abcdef"}, "bad_metadata"),  # the plan is the header's, not metadata
]


def lying(miner: Miner, change: dict[str, str]) -> Miner:
    """``miner``, signing its uploads with ``change`` applied to the metadata it would send."""
    step = miner.step

    def changed(window: int):
        upload = step(window)
        upload.metadata = {**upload.metadata, **change}
        return upload

    miner.step = changed
    return miner


def test_a_scored_window_with_hostile_metadata_scores_merges_and_refuses_with_codes(
    world_with, monkeypatch
):
    monkeypatch.setattr(
        validator_module, "random_sample_ids", functools.partial(random_sample_ids, seed=0)
    )
    changes = [{}, *EDGES, *(change for change, _ in PAST)]
    names = {"holder": "holder", "v1": "validator"} | {
        f"m{i}": "miner" for i in range(len(changes))
    }
    world = world_with(names)
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miners = [lying(Miner(world.runtimes[f"m{i}"]), c) for i, c in enumerate(changes)]
    for miner in miners:
        assert run_at(miner, 0) == 0
    validator = Validator(world.runtimes["v1"])
    assert run_at(validator, 4) == 0
    for miner in miners:
        assert run_at(miner, 6) == 1
    assert run_at(validator, 6) == 1
    assert run_at(holder, 8) == 1

    for rt in (validator.rt, holder.rt):
        assert records(rt, "window_failed") == []
    scored = records(validator.rt, "scores")[-1]
    past = {miners[1 + len(EDGES) + i].rt.hotkey: why for i, (_, why) in enumerate(PAST)}
    for hotkey, why in past.items():
        assert scored["verdicts"][hotkey][0] == "rejected" and scored["details"][hotkey] == why
    for hotkey, detail in scored["details"].items():
        assert hotkey in past or not detail.startswith(("bad_", "check_", "unreadable"))
    assert all(math.isfinite(v[1]) for v in scored["verdicts"].values())
    uploads = records(holder.rt, "uploads")[-1]
    for verdict in uploads["verdicts"].values():
        assert verdict in ("accepted", "missing", "stale") or is_code(verdict.split(":", 1)[1])
    assert {hk for hk, v in uploads["verdicts"].items() if v.startswith("rejected")} == set(past)
    version = records(holder.rt, "version")[-1]
    assert all(math.isfinite(w) for w in version.get("contributors", {}).values())


def test_a_tree_reduce_with_hostile_partials_sends_up_what_it_can(world_with, monkeypatch):
    template = Template(
        topology="@beam/fedavg@1.0.0", params={"workers": 7, "fanout": 2, "local_steps": 2}
    )
    names = {"holder": "lead"} | {f"m{i}": "worker" for i in range(7)}
    world = world_with(names, template, compression={"name": "dense-fp32"})
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    workers = sorted((Miner(world.runtimes[f"m{i}"]) for i in range(7)), key=lambda m: m.rt.hotkey)
    # What each node sends up, changed: the root's children (1, 2) send edges; of their leaves
    # (3-6) two send partials the schema refuses, one an edge, one the truth.
    changes = {1: EDGES[0], 2: EDGES[1], 3: PAST[0][0], 4: PAST[1][0], 5: EDGES[2]}
    lies = {workers[i].rt.hotkey: change for i, change in changes.items()}
    publish = Outbox.publish

    def sending(outbox, kind, window, tensors, *, metadata, base_version=None):
        change = lies.get(outbox.signer.ss58_address, {})
        metadata = {**metadata, **change}
        return publish(outbox, kind, window, tensors, metadata=metadata, base_version=base_version)

    monkeypatch.setattr(Outbox, "publish", sending)
    for worker in workers:
        run_at(worker, 0)
    for worker in reversed(workers):  # leaves first
        assert run_at(worker, 4) == 1
        assert records(worker.rt, "window_failed") == []
    reduced = {w.rt.hotkey: records(w.rt, "reduce")[-1] for w in workers}
    # worker 1 lost both its leaves (refused); worker 2 kept both; worker 2's claim of 1,048,576
    # members is capped by its subtree (3)
    assert reduced[workers[1].rt.hotkey]["members"] == 1
    assert reduced[workers[2].rt.hotkey]["members"] == 3
    root = reduced[workers[0].rt.hotkey]
    assert root["children"] == {workers[1].rt.hotkey: 1, workers[2].rt.hotkey: 3}
    assert root["members"] == 5 and math.isfinite(root["loss"])
    assert run_at(lead, 6) == 1 and records(lead.rt, "version")[-1]["version"] == 1


def test_a_ring_mix_refuses_a_model_with_hostile_metadata_and_takes_one_at_the_edge(world_with):
    template = Template(
        topology="@beam/gossip-ring@1.0.0",
        params={"workers": 3, "local_steps": 2, "mix": 0.5, "rounds": 2},
    )
    names = {"holder": "collector", "m0": "worker", "m1": "worker", "m2": "worker"}
    world = world_with(names, template, compression={"name": "dense-fp32"})
    assert ModelHolder(world.runtimes["holder"]).try_setup()
    workers = sorted((Miner(world.runtimes[f"m{i}"]) for i in range(3)), key=lambda m: m.rt.hotkey)
    lying(workers[0], PAST[0][0])  # worker 1 reads worker 0's model: refused
    lying(workers[1], EDGES[0])  # worker 2 reads worker 1's model: accepted
    for worker in workers:
        run_at(worker, 0)
    for worker in workers[1:]:
        assert run_at(worker, 4) == 1
        assert records(worker.rt, "window_failed") == []
    assert [records(w.rt, "mix")[-1]["weight"] for w in workers[1:]] == [0.0, 0.5]
