"""Known answers for simnet's Yuma-style epoch."""

from __future__ import annotations

import pytest

from subnet.chain.simnet.epoch import run_epoch, validator_permits


def test_permits_go_to_the_most_staked():
    assert validator_permits([5, 0, 9, 7], max_validators=2) == [False, False, True, True]
    assert validator_permits([0, 0], max_validators=5) == [False, False]


def test_single_validator_pays_by_its_weights():
    out = run_epoch([10, 0, 0], [True, False, False], {0: {1: 1.0, 2: 3.0}}, emission=1000)
    assert out.incentive == pytest.approx([0.0, 0.25, 0.75])
    assert out.consensus == pytest.approx([0.0, 0.25, 0.75])
    assert out.trust == pytest.approx([0.0, 1.0, 1.0])
    assert out.dividends == pytest.approx([1.0, 0.0, 0.0])
    assert out.emission == [500, 125, 375]


def test_consensus_clips_a_minority_validator():
    # Validators 0 and 1 (stake 3 and 1) disagree about miners 2 and 3.
    stakes, permits = [3, 1, 0, 0], [True, True, False, False]
    weights = {0: {2: 1.0, 3: 0.0}, 1: {2: 0.0, 3: 1.0}}
    out = run_epoch(stakes, permits, weights)
    # Stake-weighted median: 75 % of stake gives miner 2 all of its weight -> consensus 1;
    # only 25 % supports miner 3 -> consensus 0, so validator 1's weight on it is clipped away.
    assert out.consensus[2:] == pytest.approx([1.0, 0.0])
    assert out.incentive[2:] == pytest.approx([1.0, 0.0])
    assert out.trust[2:] == pytest.approx([1.0, 0.0])
    assert out.dividends[:2] == pytest.approx([1.0, 0.0])


def test_rows_of_unpermitted_uids_are_ignored():
    out = run_epoch([1, 0, 0], [True, False, False], {0: {1: 1.0}, 1: {2: 1.0}})
    assert out.incentive == pytest.approx([0.0, 1.0, 0.0])


def test_nobody_weighting_pays_nobody():
    out = run_epoch([1, 1], [True, True], {}, emission=100)
    assert out.incentive == [0.0, 0.0] and out.emission == [0, 0]
