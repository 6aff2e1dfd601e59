"""No single endpoint can stall a reader: a hostile S3 server on loopback, one bad habit each.

Every case must end quickly with a `StorageError` whose reason names the misbehaviour, so the
reader counts it against that sender (and only that sender) and moves on.
"""

from __future__ import annotations

import threading

import pytest
import torch
from bittensor.sp_core import Keypair
from hostile_s3 import HostileS3

from subnet.storage.base import StorageError
from subnet.storage.commitment import ReadSettings
from subnet.storage.keys import ObjectKind, object_key
from subnet.storage.readers import s3_reader
from subnet.storage.s3 import S3Store
from subnet.versions import ModelSync, SyncError
from subnet.wire import Expected, encode_envelope, fetch_envelope

MINER = Keypair.create_from_seed(bytes([3] * 32))
RUN = "run-1"
KEY = object_key(RUN, ObjectKind.GRADIENT, 5, MINER.ss58_address)
DEADLINE_S = 2.0


def _reader(server: HostileS3) -> S3Store:
    settings = ReadSettings(bucket="miner-bucket", endpoint_url=server.endpoint_url)
    store = s3_reader(settings, read_timeout_s=1.0, object_deadline_s=DEADLINE_S)
    assert isinstance(store, S3Store)
    return store


def _upload() -> bytes:
    return encode_envelope(signer=MINER, run=RUN, kind=ObjectKind.GRADIENT, window=5,
                           tensors={"v": torch.zeros(64)})  # fmt: skip


CASES = {
    # mode: (operation, reason)
    "drip": ("get", "too_slow"),
    "silent": ("get", "too_slow"),
    "no_length": ("head", "bad_response"),
    "no_modified": ("head", "bad_response"),
    "bad_modified": ("head", "bad_response"),
    "redirect": ("get", "bad_response"),
    "region_redirect": ("get", "bad_response"),
}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_each_hostile_endpoint_is_refused_quickly_with_its_reason(mode: str) -> None:
    op, reason = CASES[mode]
    with HostileS3(mode, drip_s=0.5) as server:
        server.objects[f"miner-bucket/{KEY}"] = server.objects[KEY] = _upload()
        store = _reader(server)
        with pytest.raises(StorageError) as caught:
            store.head(KEY) if op == "head" else store.get(KEY, 1 << 20)
        # too_slow is the call's deadline (every attempt and the body) cutting it off
        assert caught.value.reason == reason, caught.value
        assert len(server.requests) <= 9  # bounded retries and redirects


def test_the_same_calls_succeed_on_an_honest_endpoint() -> None:
    with HostileS3("ok") as server:
        server.objects[KEY] = _upload()
        store = _reader(server)
        assert store.head(KEY).size == len(server.objects[KEY])
        expected = Expected(RUN, 5, ObjectKind.GRADIENT, MINER.ss58_address)
        envelope = fetch_envelope(store, expected, None, max_bytes=1 << 20)
        assert torch.equal(envelope.tensors["v"], torch.zeros(64))


def test_a_drip_feed_is_cut_off_and_its_transfer_stops() -> None:
    with HostileS3("drip", drip_s=0.2) as server:
        server.objects[KEY] = b"x" * 10_000  # 2,000 s at this rate
        store = _reader(server)
        with pytest.raises(StorageError):
            store.get(KEY, 1 << 20)
        # The abandoned transfer stops at its next drip (0.2 s); a stuck one would read for
        # 2,000 s, far past this wait.
        for thread in [t for t in threading.enumerate() if t.name == "beam-storage-call"]:
            thread.join(timeout=120)
            assert not thread.is_alive(), "the abandoned transfer is still reading"


def test_a_stalled_holder_bucket_is_a_sync_error_within_the_deadline() -> None:
    holder = Keypair.create_from_seed(bytes([4] * 32))
    with HostileS3("silent") as server:
        syncer = ModelSync(_reader(server), holder.ss58_address, RUN, max_bytes=1 << 20)
        with pytest.raises(SyncError) as caught:
            syncer.sync(None, None)
        assert caught.value.reason == "storage:too_slow"  # the deadline cut the silence off
