"""Signed envelopes: exact round trips, and publish/fetch through a real S3 server."""

from __future__ import annotations

import pytest
import torch
from bittensor.sp_core import Keypair

from subnet.storage.config import StorageConfig
from subnet.storage.keys import ObjectKind, object_key
from subnet.storage.s3 import S3Store
from subnet.wire import (
    Expected,
    GradientMeta,
    Reason,
    Rejected,
    ScoreReportMeta,
    TensorSpec,
    encode_envelope,
    fetch_envelope,
    publish_envelope,
    spec_of,
    verify_envelope,
    verify_seal,
)

MINER = Keypair.create_from_seed(bytes(range(32)))
RUN = "run-1"
PLAN = "0123456789abcdef"
META = GradientMeta(receipt="ab" * 32, samples=64, tokens=4096, loss=3.5)


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "values": torch.randn(64, 8, generator=g).to(torch.bfloat16),
        "scale": torch.randn(64, generator=g),
        "indices": torch.randint(0, 4096, (64, 8), generator=g, dtype=torch.int64),
        "packed": torch.randint(0, 255, (128,), generator=g, dtype=torch.uint8),
    }


def _spec() -> dict[str, TensorSpec]:
    spec = spec_of(_tensors())
    spec["indices"] = TensorSpec(torch.int64, (None, 8), index_bound=4096)
    return spec


def _expected(window: int = 5) -> Expected:
    return Expected(RUN, window, ObjectKind.GRADIENT, MINER.ss58_address, base_version=3)


def test_round_trip_is_exact() -> None:
    tensors = _tensors()
    blob = encode_envelope(
        signer=MINER,
        run=RUN,
        kind=ObjectKind.GRADIENT,
        window=5,
        tensors=tensors,
        base_version=3,
        metadata=META.wire(),
        plan=PLAN,
    )
    envelope = verify_envelope(blob, _expected(), _spec(), max_bytes=len(blob))
    assert envelope.metadata == META.wire() and envelope.meta == META
    assert envelope.message(GradientMeta).samples == 64 and envelope.header.plan == PLAN
    assert envelope.header.sender == MINER.ss58_address and envelope.header.window == 5
    assert envelope.tensors.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert envelope.tensors[name].dtype == tensor.dtype
        assert torch.equal(envelope.tensors[name], tensor)


def test_encoding_is_deterministic() -> None:
    def encode() -> bytes:
        meta = ScoreReportMeta(scores={MINER.ss58_address: 0.5}, digests={}).wire()
        tensors = {"s": torch.ones(3)}
        return encode_envelope(
            signer=MINER, run=RUN, kind=ObjectKind.SCORES, window=1, tensors=tensors, metadata=meta
        )

    first, second = encode(), encode()
    assert len(first) == len(second)
    verify_envelope(
        second, Expected(RUN, 1, ObjectKind.SCORES, MINER.ss58_address), None, max_bytes=10_000
    )


def test_publish_and_fetch_through_s3(moto_server) -> None:
    config = StorageConfig(bucket="wire-test", endpoint_url=moto_server.endpoint_url)
    store = S3Store.from_config(config, moto_server.environ())
    store.ensure_bucket()
    key, written = publish_envelope(
        store,
        signer=MINER,
        run=RUN,
        kind=ObjectKind.GRADIENT,
        window=5,
        tensors=_tensors(),
        base_version=3,
    )
    assert written and key == object_key(RUN, ObjectKind.GRADIENT, 5, MINER.ss58_address)
    envelope = fetch_envelope(store, _expected(), _spec(), max_bytes=1 << 20)
    assert torch.equal(envelope.tensors["indices"], _tensors()["indices"])

    # Write-once: a second upload for the same window does not replace the first.
    _, again = publish_envelope(
        store,
        signer=MINER,
        run=RUN,
        kind=ObjectKind.GRADIENT,
        window=5,
        tensors={**_tensors(), "scale": torch.zeros(64)},
        base_version=3,
    )
    assert again is False

    # Too large is decided from the object's size, before the body is read.
    with pytest.raises(Rejected) as caught:
        fetch_envelope(store, _expected(), _spec(), max_bytes=100)
    assert caught.value.reason is Reason.TOO_LARGE

    # Replay: the window-5 object copied under the window-6 key is refused.
    blob = store.get(key, 1 << 20)
    store.put(object_key(RUN, ObjectKind.GRADIENT, 6, MINER.ss58_address), blob)
    with pytest.raises(Rejected) as caught:
        fetch_envelope(store, _expected(window=6), _spec(), max_bytes=1 << 20)
    assert caught.value.reason is Reason.WRONG_WINDOW


def test_a_seal_proves_its_header_without_the_payload() -> None:
    blob = encode_envelope(signer=MINER, run=RUN, kind=ObjectKind.GRADIENT, window=5,
                           tensors=_tensors(), base_version=3)  # fmt: skip
    envelope = verify_envelope(blob, _expected(), _spec(), max_bytes=len(blob))
    seal = envelope.seal
    assert blob.startswith(seal) and len(seal) == len(blob) - envelope.header.payload_bytes
    assert verify_seal(seal, _expected()) == envelope.header
    other = Keypair.create_from_seed(bytes(range(1, 33)))
    small = encode_envelope(signer=MINER, run=RUN, kind=ObjectKind.GRADIENT, window=5,
                            tensors={}, base_version=3)  # fmt: skip
    cases = {
        Reason.BAD_SIGNATURE: (seal.replace(b'"window":5', b'"window":6'),
                               Expected(RUN, 6, ObjectKind.GRADIENT, MINER.ss58_address)),
        Reason.WRONG_WINDOW: (seal, _expected(window=6)),
        Reason.WRONG_SENDER: (seal, Expected(RUN, 5, ObjectKind.GRADIENT, other.ss58_address)),
        Reason.MALFORMED_ENVELOPE: (small, _expected()),  # a whole envelope is not a seal
        Reason.TOO_LARGE: (seal + bytes(8192), _expected()),
    }  # fmt: skip
    for reason, (candidate, expected) in cases.items():
        with pytest.raises(Rejected) as caught:
            verify_seal(candidate, expected)
        assert caught.value.reason == reason, reason
