"""The tree all-reduce: the root's partial is the plain mean of every worker's update."""

from __future__ import annotations

import torch
from neuron_ticks import records, run_at

from subnet.compression import build_compressor
from subnet.compression.config import CompressionConfig
from subnet.neuron.actions.tree import combine, subtree_size, tree_children
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.storage.keys import ObjectKind
from subnet.topology import Template
from subnet.wire import Expected, GradientMeta, fetch_envelope


def test_tree_shape():
    assert tree_children(0, 5, 2) == [1, 2]
    assert tree_children(1, 5, 2) == [3, 4]
    assert tree_children(2, 5, 2) == []
    assert [subtree_size(i, 5, 2) for i in range(5)] == [5, 3, 1, 1, 1]
    assert tree_children(0, 7, 3) == [1, 2, 3] and subtree_size(0, 7, 3) == 7


def _reduce_up(index: int, n: int, fanout: int, deltas) -> tuple[dict, float]:
    """What each node sends up: its subtree's mean and its member count."""
    parts = [(deltas[index], 1.0)] + [
        _reduce_up(c, n, fanout, deltas) for c in tree_children(index, n, fanout)
    ]
    return combine(parts), float(sum(w for _, w in parts))


def test_the_root_partial_is_the_plain_mean():
    torch.manual_seed(0)
    for n, fanout in [(1, 2), (2, 2), (5, 2), (7, 3), (6, 4)]:
        deltas = [{"w": torch.randn(4, 3), "b": torch.randn(3)} for _ in range(n)]
        root, members = _reduce_up(0, n, fanout, deltas)
        assert members == n
        for k in ("w", "b"):
            mean = sum(d[k] for d in deltas) / n
            assert torch.allclose(root[k], mean, atol=1e-6), (n, fanout, k)


def test_fedavg_lead_merges_the_tree_mean_through_the_real_roles(world_with):
    """Three workers (fanout 2), dense updates: the root's partial equals the plain mean of the
    three updates, and the lead's version 1 is version 0 minus that mean (fedavg outer step)."""
    template = Template(topology="@beam/fedavg@1.0.0",
                        params={"workers": 3, "fanout": 2, "local_steps": 2})  # fmt: skip
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker", "m3": "worker"},
                       template, compression={"name": "dense-fp32"})  # fmt: skip
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    v0 = {k: v.clone() for k, v in lead.publisher.latest_state.items()}
    workers = sorted((Miner(world.runtimes[n]) for n in ("m1", "m2", "m3")),
                     key=lambda m: m.rt.hotkey)  # fmt: skip
    for worker in workers:
        run_at(worker, 0)  # train (no lane: kept for reduce)
    for worker in reversed(workers):  # leaves first; the root waits for its children
        assert run_at(worker, 4) == 1
    codec = build_compressor(CompressionConfig(name="dense-fp32"))
    shapes = {k: tuple(v.shape) for k, v in v0.items()}
    deltas = [codec.decode(w.trained.payload, shapes) for w in workers]
    mean = {k: sum(d[k] for d in deltas) / 3 for k in shapes}
    root = workers[0].rt
    expected = Expected(root.cfg.protocol.run, 0, ObjectKind.GRADIENT, root.hotkey,
                        lane="partials")  # fmt: skip
    partial = fetch_envelope(root.store, expected, None, max_bytes=1 << 30)
    assert partial.message(GradientMeta).members == 3 and partial.header.plan == root.plan.digest
    got = codec.decode(partial.tensors, shapes)
    assert all(torch.allclose(got[k], mean[k], atol=1e-6) for k in shapes)

    assert run_at(lead, 6) == 1
    version = records(lead.rt, "version")[-1]
    assert version["version"] == 1 and version["contributors"] == {root.hotkey: 1.0}
    merged = lead.publisher.latest_state
    assert all(torch.allclose(merged[k], v0[k] - mean[k], atol=1e-5) for k in shapes)
