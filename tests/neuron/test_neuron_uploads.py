"""A window's uploads: honest ones decode; each bad one costs its sender the window, not the reader.

Uses the in-memory store (pure logic); the real S3 path is covered by the integration test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from bittensor.sp_core import Keypair

from subnet.compression import CompressionConfig, build_compressor
from subnet.config import BeamConfig, ProtocolConfig
from subnet.data import sample_receipt
from subnet.model import build_model
from subnet.neuron.lanes import Inbox
from subnet.neuron.uploads import collect_uploads
from subnet.storage.keys import ObjectKind
from subnet.storage.memory import MemoryStore
from subnet.training import snapshot
from subnet.wire import publish_envelope

WINDOW, VERSION = 7, 3


def assigned(hotkey: str) -> list[int]:
    return [len(hotkey), 1, 2, 3]  # any deterministic function of the hotkey will do


class Exploding:
    """A hostile bucket whose reads fail in a way no storage code expects."""

    def get(self, key, max_bytes):
        raise KeyError("ContentLength")


@dataclass
class Readers:
    stores: dict = field(default_factory=dict)

    def get(self, hotkey):
        return self.stores.get(hotkey)


@pytest.fixture
def world():
    protocol = ProtocolConfig(holder_hotkey="x")
    plan = SimpleNamespace(digest="ab" * 8, slots={})
    rt = SimpleNamespace(
        cfg=BeamConfig(protocol=protocol),
        readers=Readers(),
        max_bytes=1 << 24,
        plan=plan,
        inbox=lambda lane: Inbox(protocol.run, lane, plan.digest),
    )
    params = snapshot(build_model("tiny", seed=0))
    shapes = {k: tuple(v.shape) for k, v in params.items()}
    compressor = build_compressor(CompressionConfig())
    return rt, shapes, compressor, params


def upload(rt, name, compressor, params, plan=None, payload=None, **meta_overrides):
    signer = Keypair.create_from_uri(f"//{name}")
    store = MemoryStore(name)
    if payload is None:
        payload = compressor.encode({k: v * 0.01 for k, v in params.items()})
    metadata = {"receipt": sample_receipt(assigned(signer.ss58_address)), "tokens": "1024",
                **meta_overrides}  # fmt: skip
    publish_envelope(store, signer=signer, run=rt.cfg.protocol.run, kind=ObjectKind.GRADIENT,
                     window=WINDOW, tensors=payload, base_version=VERSION, metadata=metadata,
                     plan=plan or rt.plan.digest)  # fmt: skip
    rt.readers.stores[signer.ss58_address] = store
    return signer.ss58_address


def test_each_bad_upload_is_refused_with_its_reason(world):
    rt, shapes, compressor, params = world
    honest = upload(rt, "honest", compressor, params)
    receipt = upload(rt, "lazy", compressor, params, receipt="0" * 64)
    config = upload(rt, "other", compressor, params, plan="0" * 16)
    tokens = upload(rt, "liar", compressor, params, tokens="1e99")
    hostile = Keypair.create_from_uri("//hostile").ss58_address
    rt.readers.stores[hostile] = Exploding()
    absent = Keypair.create_from_uri("//absent").ss58_address
    rt.readers.stores[absent] = MemoryStore("empty")
    nobucket = Keypair.create_from_uri("//nobucket").ss58_address
    senders = [honest, receipt, config, tokens, hostile, absent, nobucket]

    got = collect_uploads(rt, WINDOW, senders, base_version=VERSION, compressor=compressor,
                          shapes=shapes, assigned=assigned)  # fmt: skip

    assert set(got.accepted) == {honest}
    assert got.accepted[honest].tokens == 1024
    assert set(got.accepted[honest].decode()) == set(shapes)
    assert got.rejected == {receipt: "bad_receipt", config: "wrong_plan", tokens: "bad_metadata",
                            hostile: "unreadable", nobucket: "no_bucket"}  # fmt: skip
    assert got.missing == {absent}


def test_an_upload_on_another_base_version_is_stale(world):
    rt, shapes, compressor, params = world
    miner = upload(rt, "behind", compressor, params)
    got = collect_uploads(rt, WINDOW, [miner], base_version=VERSION + 1, compressor=compressor,
                          shapes=shapes, assigned=assigned)  # fmt: skip
    assert got.stale == {miner} and not got.accepted


def test_an_upload_on_another_lane_is_not_read_as_this_lanes(world):
    rt, shapes, compressor, params = world
    signer = Keypair.create_from_uri("//elsewhere")
    store = MemoryStore("elsewhere")
    metadata = {"receipt": sample_receipt(assigned(signer.ss58_address)), "tokens": "1"}
    publish_envelope(store, signer=signer, run=rt.cfg.protocol.run, kind=ObjectKind.GRADIENT,
                     window=WINDOW, tensors=compressor.encode(params), base_version=VERSION,
                     metadata=metadata, lane="grads-b", plan=rt.plan.digest)  # fmt: skip
    rt.readers.stores[signer.ss58_address] = store
    kw = {"base_version": VERSION, "compressor": compressor, "shapes": shapes,
          "assigned": assigned}  # fmt: skip
    assert collect_uploads(rt, WINDOW, [signer.ss58_address], lane="grads", **kw).missing == {
        signer.ss58_address
    }
    got = collect_uploads(rt, WINDOW, [signer.ss58_address], lane="grads-b", **kw)
    assert set(got.accepted) == {signer.ss58_address}


def test_a_readers_measure_validates_and_measures_in_one_parse(world):
    """With ``measure`` the payload is validated by it: an honest upload carries what it said
    (here the codec's support and norm), an invalid payload is refused with the reason the
    codec's ``validate`` gives, and a measure that breaks refuses its sender as unreadable."""
    rt, shapes, compressor, params = world
    good = compressor.encode({k: v * 0.01 for k, v in params.items()})
    bad = dict(good)
    bad["rice::k"] = bad["rice::k"].clone()
    bad["rice::k"][0] = 13  # above rice.MAX_K
    honest = upload(rt, "honest", compressor, params, payload=good)
    forged = upload(rt, "forged", compressor, params, payload=bad)
    reason = compressor.validate(bad, shapes)
    assert reason == "invalid_value"

    def measure(payload):
        return compressor.measure(payload, shapes)

    got = collect_uploads(
        rt,
        WINDOW,
        [honest, forged],
        base_version=VERSION,
        compressor=compressor,
        shapes=shapes,
        assigned=assigned,
        measure=measure,
    )
    assert set(got.accepted) == {honest} and got.rejected == {forged: reason}
    support, norm = got.accepted[honest].measured
    want_support, want_norm = compressor.measure(good, shapes)
    assert (support == want_support).all() and norm == want_norm

    def broken(payload):
        raise ArithmeticError("an update of norm nan")

    got = collect_uploads(
        rt,
        WINDOW,
        [honest],
        base_version=VERSION,
        compressor=compressor,
        shapes=shapes,
        assigned=assigned,
        measure=broken,
    )
    assert not got.accepted and got.rejected == {honest: "unreadable"}
