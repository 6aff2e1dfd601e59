"""End to end over real S3 (moto over HTTP): a holder publishes, a fresh and a lagging peer sync."""

from __future__ import annotations

import torch
from bittensor.sp_core import Keypair

from subnet.compression.patch import state_digest
from subnet.model import build_model, weights_digest
from subnet.storage.config import StorageConfig
from subnet.storage.local_server import MotoServer
from subnet.storage.s3 import S3Store
from subnet.versions import ModelSync, VersionPublisher, load_state, model_state

RUN = "versions-moto"


def _store(server: MotoServer, bucket: str) -> S3Store:
    config = StorageConfig(
        bucket=bucket,
        endpoint_url=server.endpoint_url,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )
    return S3Store.from_config(config, server.environ())


def test_holder_and_peers_over_s3(moto_server: MotoServer, holder: Keypair) -> None:
    holder_store = _store(moto_server, "beam-versions-e2e")
    holder_store.ensure_bucket()
    model = build_model("tiny", seed=0)
    publisher = VersionPublisher(holder_store, holder, RUN, checkpoint_every=2)
    publisher.publish(model_state(model), -1)
    states = [model_state(model)]
    for window in range(1, 6):
        with torch.no_grad():
            for i, param in enumerate(model.parameters()):
                if (i + window) % 3 == 0:
                    param.mul_(0.999)
        publisher.publish(model_state(model), window)
        states.append(model_state(model))

    peer_store = _store(moto_server, "beam-versions-e2e")  # its own client, same bucket
    fresh = ModelSync(peer_store, holder.ss58_address, RUN, max_bytes=8 << 20)
    state, manifest = fresh.sync(None, None)
    assert (manifest.version, manifest.checkpoint_version) == (5, 4)
    assert fresh.last_path == "checkpoint"
    peer = build_model("tiny", seed=7)
    load_state(peer, state)
    assert weights_digest(peer) == weights_digest(model)

    lagging = ModelSync(peer_store, holder.ss58_address, RUN, max_bytes=8 << 20)
    state, manifest = lagging.sync(states[2], 2)
    assert lagging.last_path == "patches"
    assert state_digest(state).hex() == manifest.digest == state_digest(states[5]).hex()
