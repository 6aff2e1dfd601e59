"""Sticky file shares: each trainer trains only on its own share, the same share every round."""

from __future__ import annotations

from subnet.neuron.actions.shares import file_shares, share_bounds, share_ids
from subnet.neuron.holder import ModelHolder
from subnet.topology import Template


def test_shares_partition_the_split():
    shares = [share_bounds(i, 3, 10) for i in range(3)]
    assert [list(s) for s in shares] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert share_ids(shares[2], 0, 3) == [6, 7, 8] and share_ids(shares[2], 1, 3) == [9, 6, 7]


def test_each_worker_keeps_its_own_files_every_round(world_with):
    template = Template(topology="@beam/fedavg-data@1.0.0", params={"workers": 2})
    world = world_with({"holder": "lead", "m1": "worker", "m2": "worker"}, template)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    rt, total = world.runtimes["m1"], lead.data.split_samples("train")
    workers = sorted([world.hotkey("m1"), world.hotkey("m2")])
    seen: dict[str, set[int]] = {hk: set() for hk in workers}
    for window in range(6):
        ids = file_shares(rt, lead.data, window)
        for i, hk in enumerate(workers):
            got = ids(hk)
            assert got and set(got) <= set(share_bounds(i, 2, total)), (window, hk)
            seen[hk] |= set(got)
        assert ids(world.hotkey("holder")) == []  # not a trainer
    assert not seen[workers[0]] & seen[workers[1]]
