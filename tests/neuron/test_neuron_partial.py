"""Partial uploads: a prefix of the assignment is accepted and credited pro rata; nothing else is."""

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
from subnet.neuron.uploads import collect_uploads, log_uploads
from subnet.scoring import Evaluation, ScoringConfig, score_window, window_score
from subnet.storage.keys import ObjectKind
from subnet.storage.memory import MemoryStore
from subnet.training import snapshot
from subnet.wire import publish_envelope

WINDOW, VERSION = 4, 1
IDS = [11, 3, 7, 42, 5, 19, 23, 8]  # 4 steps x micro-batch 2


def assigned(hotkey: str) -> list[int]:
    return list(IDS)


@dataclass
class Readers:
    stores: dict = field(default_factory=dict)

    def get(self, hotkey):
        return self.stores.get(hotkey)


@pytest.fixture
def world():
    protocol = ProtocolConfig(holder_hotkey="x",
                              inner={"steps": 4, "micro_batch": 2, "min_steps": 2})  # fmt: skip
    plan = SimpleNamespace(digest="ab" * 8, slots={})
    rt = SimpleNamespace(
        cfg=BeamConfig(protocol=protocol),
        readers=Readers(),
        max_bytes=1 << 24,
        plan=plan,
        inbox=lambda lane: Inbox(protocol.run, lane, plan.digest),
    )
    params = snapshot(build_model("tiny", seed=0))
    return (
        rt,
        {k: tuple(v.shape) for k, v in params.items()},
        build_compressor(CompressionConfig()),
        params,
    )


def send(world, name, receipt_ids, samples=None):
    rt, _, compressor, params = world
    signer = Keypair.create_from_uri(f"//{name}")
    store = MemoryStore(name)
    meta = {"receipt": sample_receipt(receipt_ids), "tokens": "128"}
    if samples is not None:
        meta["samples"] = str(samples)
    publish_envelope(store, signer=signer, run=rt.cfg.protocol.run, kind=ObjectKind.GRADIENT,
                     window=WINDOW, tensors=compressor.encode({k: v * 0.01 for k, v in params.items()}),
                     base_version=VERSION, metadata=meta, plan=rt.plan.digest)  # fmt: skip
    rt.readers.stores[signer.ss58_address] = store
    return signer.ss58_address


def collect(world, senders):
    rt, shapes, compressor, _ = world
    return collect_uploads(rt, WINDOW, senders, base_version=VERSION, compressor=compressor,
                           shapes=shapes, assigned=assigned)  # fmt: skip


def test_a_prefix_of_at_least_the_minimum_is_accepted_pro_rata(world):
    full = send(world, "full", IDS)  # no samples field: the whole assignment
    three = send(world, "three", IDS[:6], samples=6)
    two = send(world, "two", IDS[:4], samples=4)  # exactly min_steps
    got = collect(world, [full, three, two])
    assert set(got.accepted) == {full, three, two} and not got.rejected
    assert (got.accepted[full].samples, got.accepted[full].fraction) == (8, 1.0)
    assert (got.accepted[three].steps, got.accepted[three].fraction) == (3, 0.75)
    assert got.accepted[two].fraction == 0.5


@pytest.mark.parametrize(
    "receipt_ids, samples, reason",
    [
        (IDS[:2], 2, "too_few_steps"),  # 1 step < min_steps 2
        (IDS[:5], 5, "bad_receipt"),  # not whole steps
        (IDS[2:8], 6, "bad_receipt"),  # six assigned ids, but not the first six
        (IDS, 6, "bad_receipt"),  # claims 6, receipt of all 8
        (IDS[:6], 8, "bad_receipt"),  # claims the whole window with a prefix's receipt
        (IDS + [1, 2], 10, "bad_receipt"),  # more than assigned
        (IDS[:6], "6.0", "bad_metadata"),
        ([IDS[1], IDS[0], *IDS[2:6]], 6, "bad_receipt"),  # the prefix, reordered
    ],
)
def test_anything_but_a_prefix_is_refused(world, receipt_ids, samples, reason):
    miner = send(world, "cheat", receipt_ids, samples=samples)
    assert collect(world, [miner]).rejected == {miner: reason}


def test_score_is_scaled_by_the_fraction_trained():
    cfg = ScoringConfig()
    whole = Evaluation("a", 4.0, 3.0, 4.0, 3.8)
    half = Evaluation("a", 4.0, 3.0, 4.0, 3.8, fraction=0.5)
    assert window_score(half, cfg) == pytest.approx(0.5 * window_score(whole, cfg))
    assert window_score(Evaluation("a", 4.0, 3.0, 4.0, 3.8, fraction=2.0), cfg) == window_score(
        whole, cfg
    )
    verdicts = score_window([half], (), (), (), {}, {}, cfg)
    assert verdicts["a"].reason == "scored" and verdicts["a"].detail == "partial 0.50, alone"


def test_every_outcome_and_an_empty_window_are_recorded(world):
    full = send(world, "full", IDS)
    cheat = send(world, "cheat", IDS[2:8], samples=6)
    absent = Keypair.create_from_uri("//absent").ss58_address
    world[0].readers.stores[absent] = MemoryStore("empty")
    got = collect(world, [full, cheat, absent])
    records = []
    metrics = SimpleNamespace(log=lambda event, **f: records.append((event, f)))
    log_uploads(metrics, WINDOW, got, {full: 1.0}, reports=2)
    log_uploads(metrics, WINDOW + 1, got, {}, reports=0)
    (_, merged), (_, empty) = records
    assert merged["verdicts"] == {
        full: "accepted",
        cheat: "rejected:bad_receipt",
        absent: "missing",
    }
    assert merged["merged"] == [full] and merged["empty"] == "" and merged["samples"] == {full: 8}
    assert empty["merged"] == [] and empty["empty"] == "no positive score"
