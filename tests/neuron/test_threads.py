"""A checked miner's CPU threads: held to what a validator's replay runs on (``MAX_THREADS``),
said in its uploads only where they are checked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from subnet.config import BeamConfig
from subnet.neuron.miner import Miner
from subnet.node.entry import hold_threads
from subnet.wire import Reason, Rejected
from subnet.wire.schema import MAX_THREADS, GradientMeta


@pytest.fixture
def own_threads():
    own = torch.get_num_threads()
    yield own
    torch.set_num_threads(own)


def test_a_miner_on_more_default_threads_than_a_replay_runs_on_is_held_to_them(own_threads):
    torch.set_num_threads(MAX_THREADS + 8)
    hold_threads()
    assert torch.get_num_threads() == MAX_THREADS
    torch.set_num_threads(2)
    hold_threads()  # fewer: left alone
    assert torch.get_num_threads() == 2


def _miner(beacon, checks: int) -> SimpleNamespace:
    cfg = BeamConfig.model_validate({"protocol": {"scoring": {"checks": checks}}})
    return SimpleNamespace(rt=SimpleNamespace(beacon=beacon, cfg=cfg))


def test_uploads_say_their_threads_only_where_a_check_replays_them(own_threads):
    torch.set_num_threads(3)
    assert Miner.threads(_miner(lambda block: "pulse", 1)) == 3
    assert Miner.threads(_miner(None, 1)) is None  # a room: no beacon, nothing checked
    assert Miner.threads(_miner(lambda block: "pulse", 0)) is None  # checks off


def test_more_threads_than_a_replay_runs_on_are_refused_on_the_wire():
    assert GradientMeta.parse({"threads": str(MAX_THREADS)}).threads == MAX_THREADS
    with pytest.raises(Rejected) as refused:
        GradientMeta.parse({"threads": str(MAX_THREADS + 1)})
    assert refused.value.reason == Reason.BAD_METADATA
