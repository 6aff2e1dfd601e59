"""Signed data grants: disjoint units, honoured only from data.grant holders; admission mid-run."""

from __future__ import annotations

from neuron_ticks import records, run_at

from subnet.membership import Roster
from subnet.neuron.actions.grants import allocate, granted, grants_for
from subnet.neuron.actions.signed import put_message
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.storage.keys import ObjectKind
from subnet.topology import Template
from subnet.wire import GrantMeta


def test_allocation_is_disjoint_consecutive_and_cycles():
    got = allocate(["b", "a"], 2, 0, 10)
    assert got == {"a": [0, 1], "b": [2, 3]}
    assert allocate(["a", "b"], 2, 1, 10) == {"a": [4, 5], "b": [6, 7]}
    assert allocate(["a", "b"], 2, 2, 10) == {"a": [8, 9], "b": [0, 1]}  # wraps


TEMPLATE = Template(topology="@beam/elastic-diloco@1.0.0",
                    params={"inner_steps": 2, "units_per_worker": 2, "rounds": 3})  # fmt: skip


def _set_roster(world, roster: Roster) -> None:
    for rt in world.runtimes.values():
        rt.membership.roster = roster


def test_only_grants_from_data_grant_holders_count(world_with):
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, TEMPLATE)
    lead, m1, m2 = (world.runtimes[n] for n in ("holder", "m1", "m2"))
    put_message(lead, ObjectKind.DATA_GRANT, 3, "grants", GrantMeta(grants={m1.hotkey: (4, 5)}))
    # m2 writes itself a grant in its own bucket: it holds no data.grant, so nobody reads it
    put_message(m2, ObjectKind.DATA_GRANT, 3, "grants", GrantMeta(grants={m2.hotkey: (0,)}))
    assert grants_for(m1, 3) == {m1.hotkey: [4, 5]}
    lead_holder = ModelHolder(lead)
    assert lead_holder.try_setup()
    ids = granted(m1, lead_holder.data, 3)
    size = m1.cfg.protocol.inner.micro_batch * m1.cfg.protocol.inner.accumulation
    assert ids(m1.hotkey) == list(range(4 * size, 6 * size)) and ids(m2.hotkey) == []


def test_a_member_joining_mid_run_is_granted_and_merged_next_round(world_with):
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, TEMPLATE)
    full = world.roster
    m2_key = world.hotkey("m2")
    _set_roster(world, Roster(tuple(m for m in full.members if m.hotkey != m2_key)))
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    m1, m2 = Miner(world.runtimes["m1"]), Miner(world.runtimes["m2"])

    run_at(m1, 0, 5)  # no grant for round 0: train waits, then is missed (never run ungranted)
    assert records(m1.rt, "train") == []
    run_at(lead, 6, 7, 8)  # merge (nobody granted: nothing), admit m1, grant round 1
    assert records(lead.rt, "admitted")[-1]["members"] == [world.hotkey("m1")]

    # round 1: m1 trains its granted units (version_out lapses: round 0 merged nothing)
    assert run_at(m1, 10, 11) == 1
    _set_roster(world, full)  # m2 joins during round 1
    run_at(lead, 16, 17, 18)
    v1 = records(lead.rt, "version")[-1]
    assert v1["version"] == 1 and v1["contributors"] == {world.hotkey("m1"): 1.0}
    assert records(lead.rt, "admitted")[-1]["joined"] == [m2_key]
    grant2 = records(lead.rt, "grant")[-1]
    assert grant2["window"] == 2 and set(grant2["units"]) == {world.hotkey("m1"), m2_key}

    for worker in (m1, m2):
        assert run_at(worker, 20) == 1
    run_at(lead, 26, 27, 28)
    v2 = records(lead.rt, "version")[-1]
    assert v2["version"] == 2 and set(v2["contributors"]) == {world.hotkey("m1"), m2_key}

    _set_roster(world, Roster(tuple(m for m in full.members if m.hotkey != m2_key)))
    assert lead.finished()  # rounds = 3
