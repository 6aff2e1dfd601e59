"""Sticky file shares: each trainer trains only on its own whole files, the same every round."""

from __future__ import annotations

import pytest

from subnet.config import ConfigError
from subnet.neuron.actions.shares import file_share, file_shares, share_bounds, share_ids
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.topology import Template


def test_shares_partition_the_items():
    shares = [share_bounds(i, 3, 10) for i in range(3)]
    assert [list(s) for s in shares] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert share_ids(shares[2], 0, 3) == [6, 7, 8] and share_ids(shares[2], 1, 3) == [9, 6, 7]


def fedavg_data(world_with, workers: int):
    names = {"holder": "lead", **{f"m{i}": "worker" for i in range(workers)}}
    template = Template(topology="@beam/fedavg-data@2.0.0", params={"workers": workers})
    world = world_with(names, template)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    return world, lead


def test_each_worker_keeps_its_own_files_every_round(world_with):
    world, lead = fedavg_data(world_with, 2)
    data, rt = lead.data, world.runtimes["m0"]
    files = data.files("train")
    assert len(files) == 3  # the tiny dataset: two full shards and a short one
    workers = sorted([world.hotkey("m0"), world.hotkey("m1")])
    owned = {hk: file_share(data, i, 2) for i, hk in enumerate(workers)}
    assert owned[workers[0]] == files[:1] and owned[workers[1]] == files[1:]
    seen: dict[str, set[str]] = {hk: set() for hk in workers}
    for window in range(12):  # 40 samples a window: enough to wrap around either share
        ids = file_shares(rt, data, window)
        for hk in workers:
            got = ids(hk)
            assert got and set(data.files_of(got)) <= set(owned[hk]), (window, hk)
            seen[hk] |= set(data.files_of(got))
        assert ids(world.hotkey("holder")) == []  # not a trainer
    assert seen == {
        hk: set(f) for hk, f in owned.items()
    }  # every file trained on, each by one worker only, every round


def test_fewer_files_than_workers_is_one_clear_error_at_setup(world_with):
    world, lead = fedavg_data(world_with, 4)  # 3 files for 4 workers
    with pytest.raises(ConfigError, match="3 train files for 4 trainers"):
        Miner(world.runtimes["m0"]).try_setup()
