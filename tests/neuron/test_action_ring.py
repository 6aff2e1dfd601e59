"""Gossip on a ring: each worker's next base mixes in its predecessor's model; the collector
averages the final models."""

from __future__ import annotations

import torch
from neuron_ticks import records, run_at

from subnet.neuron.actions.ring import mix_states, predecessor
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.storage.keys import ObjectKind
from subnet.topology import Template
from subnet.wire import Expected, fetch_envelope


def test_predecessor_wraps_around_the_ring():
    ring = ["a", "b", "c"]
    assert [predecessor(ring, hk) for hk in ring] == ["c", "a", "b"]


def test_mix_is_the_convex_combination():
    own, other = {"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, 6.0])}
    assert torch.equal(mix_states(own, other, 0.25)["w"], torch.tensor([1.5, 3.0]))
    assert torch.equal(mix_states(own, other, 0.0)["w"], own["w"])


def _published(rt, window: int) -> dict[str, torch.Tensor]:
    expected = Expected(rt.cfg.protocol.run, window, ObjectKind.CHECKPOINT, rt.hotkey, lane="ring")
    return dict(fetch_envelope(rt.store, expected, None, max_bytes=1 << 30).tensors)


def test_each_worker_mixes_its_predecessor_every_round_and_the_collector_merges(world_with):
    template = Template(topology="@beam/gossip-ring@1.0.0",
                        params={"workers": 2, "local_steps": 2, "mix": 0.5, "rounds": 2})  # fmt: skip
    world = world_with({"holder": "collector", "m1": "worker", "m2": "worker"}, template,
                       compression={"name": "dense-fp32"})  # fmt: skip
    collector = ModelHolder(world.runtimes["holder"])
    assert collector.try_setup()
    workers = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    ring = sorted(w.rt.hotkey for w in workers)
    for window in (0, 1):
        for w in workers:
            run_at(w, 10 * window)  # train: the whole model goes out on the ring lane
        models = {w.rt.hotkey: _published(w.rt, window) for w in workers}
        for w in workers:
            assert run_at(w, 10 * window + 4) == 1  # mix
            pred = models[predecessor(ring, w.rt.hotkey)]
            want = mix_states(models[w.rt.hotkey], pred, 0.5)
            assert all(torch.allclose(w.replica.state[k], want[k]) for k in want)
        if window == 0:  # not the final round: the collector's final merge does not run
            run_at(collector, 6, 7)
            assert [v["version"] for v in records(collector.rt, "version")] == [0]
    assert run_at(collector, 16) == 1
    final = collector.publisher.latest_state
    mean = {k: (models[ring[0]][k] + models[ring[1]][k]) / 2 for k in final}
    assert all(torch.allclose(final[k], mean[k], atol=1e-6) for k in final)
    assert records(collector.rt, "version")[-1]["version"] == 1
