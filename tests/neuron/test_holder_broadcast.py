"""The holder's sparse broadcast in the one loop: a merged window goes out as a delta that a miner
rebuilds bit for bit, and a holder that crashed before publishing sends the same delta after its
restart (its pending delta and error feedback are part of its saved state)."""

from __future__ import annotations

import functools

import pytest
from neuron_ticks import run_at

import subnet.neuron.validator as validator_module
from subnet.compression import state_digest
from subnet.data import random_sample_ids
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.validator import Validator
from subnet.training import snapshot
from subnet.versions import VersionPublisher


def _uploads_and_scores(world, monkeypatch: pytest.MonkeyPatch) -> ModelHolder:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup() and holder.version == 0
    miners = [Miner(world.runtimes[name]) for name in ("m1", "m2")]
    validator = Validator(world.runtimes["v1"])
    # Commit-reveal: the miners commit (tick 0), the validator reads the commits at the deadline
    # (tick 4) and waits for the reveals, which go out after a guard tick (tick 6); then it scores.
    assert all(run_at(miner, 0) == 0 for miner in miners)
    assert run_at(validator, 4) == 0
    assert all(run_at(miner, 6) == 1 for miner in miners)
    assert run_at(validator, 6) == 1
    return holder


@pytest.fixture
def world(world_with):
    """The subnet with the sparse broadcast on, at one upload's budget."""
    return world_with(None, broadcast="sparse", broadcast_budget=1)


def test_the_default_broadcast_is_sparse_for_the_sparse_codec(world_with, monkeypatch) -> None:
    """`auto` with the default sparseloco-rice: deltas at 4x the upload's top-k."""
    world = world_with(None)
    holder = _uploads_and_scores(world, monkeypatch)
    assert holder.broadcast is not None
    assert holder.broadcast.codec.topk == 4 * world.runtimes["holder"].cfg.protocol.compression.topk
    assert run_at(holder, 8) == 1
    manifest = holder.publisher.latest
    assert manifest.version == 1 and manifest.delta_key and manifest.patch_key is None


def test_patch_broadcast_publishes_the_lossless_patch(world_with, monkeypatch) -> None:
    holder = _uploads_and_scores(world_with(None, broadcast="patch"), monkeypatch)
    assert holder.broadcast is None
    assert run_at(holder, 8) == 1
    manifest = holder.publisher.latest
    assert manifest.version == 1 and manifest.patch_key and manifest.delta_key is None


def test_a_merged_window_goes_out_as_a_delta_a_miner_rebuilds(world, monkeypatch) -> None:
    holder = _uploads_and_scores(world, monkeypatch)
    assert holder.broadcast is not None  # sparseloco-rice with --protocol.broadcast sparse
    assert run_at(holder, 8) == 1
    manifest = holder.publisher.latest
    assert manifest.version == 1 and manifest.delta_key and manifest.patch_key is None
    assert world.stores["holder"].head(manifest.delta_key)
    assert state_digest(snapshot(holder.model)).hex() == manifest.digest
    miner = Miner(world.runtimes["m1"])
    run_at(miner, 10)
    assert miner.replica.version == 1 and miner.replica.syncer.last_fallback is None
    assert state_digest(miner.replica.state).hex() == manifest.digest


def test_the_broadcast_budget_sets_the_deltas_top_k_and_miners_follow_it(
    world_with, monkeypatch
) -> None:
    """`--protocol.broadcast_budget 4`: the manifest names a codec keeping 4x the upload's top-k,
    and a miner rebuilds the version from the delta with it, bit for bit."""
    world = world_with(None, broadcast="sparse", broadcast_budget=4)
    holder = _uploads_and_scores(world, monkeypatch)
    upload_topk = world.runtimes["holder"].cfg.protocol.compression.topk
    assert holder.broadcast.codec.topk == 4 * upload_topk
    assert run_at(holder, 8) == 1
    manifest = holder.publisher.latest
    assert manifest.delta_key and manifest.delta_codec.topk == 4 * upload_topk
    miner = Miner(world.runtimes["m1"])
    run_at(miner, 10)
    assert miner.replica.version == 1 and miner.replica.syncer.last_fallback is None
    assert state_digest(miner.replica.state).hex() == manifest.digest


def test_a_crash_before_publishing_sends_the_same_delta_after_restart(world, monkeypatch) -> None:
    holder = _uploads_and_scores(world, monkeypatch)
    real = VersionPublisher.publish

    def crash(self, state, window, delta=None, equivocations=None):
        raise KeyboardInterrupt("the holder dies after its merge was saved")

    monkeypatch.setattr(VersionPublisher, "publish", crash)
    with pytest.raises(KeyboardInterrupt):
        run_at(holder, 8)
    merged = state_digest(snapshot(holder.model)).hex()
    assert holder.unpublished == 0 and holder.pending_delta is not None
    monkeypatch.setattr(VersionPublisher, "publish", real)

    restarted = ModelHolder(world.runtimes["holder"])
    assert restarted.try_setup()
    assert restarted.unpublished == 0 and restarted.pending_delta is not None
    assert restarted.broadcast.state_dict().keys() == holder.broadcast.state_dict().keys()
    restarted.publish_pending(None)
    manifest = restarted.publisher.latest
    assert manifest.version == 1 and manifest.delta_key is not None
    assert manifest.digest == merged
