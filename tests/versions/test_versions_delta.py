"""The sparse broadcast: a holder publishes re-sparsified merged steps, peers rebuild them bit for
bit, fall back to the checkpoint with a reason when they cannot, and joiners start from one.

The S3 tests run over real S3 (moto's server over HTTP), each in its own bucket.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from bittensor.sp_core import Keypair
from torch import Tensor
from versions_support import CountingStore

from subnet.compression import CompressionConfig, build_compressor, payload_nbytes, state_digest
from subnet.compression.chunking import ChunkLayout
from subnet.model import build_model
from subnet.storage import MemoryStore, ObjectStore
from subnet.storage.config import StorageConfig
from subnet.storage.keys import ObjectKind, parse_key
from subnet.storage.local_server import MotoServer
from subnet.storage.s3 import S3Store
from subnet.versions import ModelManifest, ModelSync, VersionPublisher, layout, model_state
from subnet.versions import delta as delta_module
from subnet.versions.delta import (
    Resparsifier,
    SparseDelta,
    apply_delta,
    delta_codec,
    uses_sparse_broadcast,
)

RUN = "delta-run"
MAX = 8 << 20
CODEC = CompressionConfig(name="sparseloco-rice", topk=8, chunk=16)
_buckets = itertools.count()


def _merged_step(state: dict[str, Tensor], uploads: int, seed: int) -> dict[str, Tensor]:
    """What a holder's outer step (SGD, lr 2) would move: the mean of `uploads` sparse uploads."""
    compressor = build_compressor(CODEC)
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    gen = torch.Generator().manual_seed(seed)
    total = {k: torch.zeros_like(v) for k, v in state.items()}
    for _ in range(uploads):
        grad = {k: 1e-3 * torch.randn(v.shape, generator=gen) for k, v in state.items()}
        for k, v in compressor.decode(compressor.encode(grad), shapes).items():
            total[k] += 2.0 * v / uploads
    return total


def _history(
    publisher: VersionPublisher, versions: int, uploads: int = 4, budget: float = 1, **way
) -> list[SparseDelta]:
    """Publish v0 and `versions` sparse versions after it, as a holder does; return the deltas
    (`way`: the Resparsifier's scope and decay)."""
    state = model_state(build_model("tiny", seed=0))
    publisher.publish(state, -1)
    spars, deltas = Resparsifier(CODEC, budget, **way), []
    for window in range(versions):
        step = _merged_step(state, uploads, seed=window)
        target = {k: state[k] - step[k] for k in state}
        state, delta = spars.reduce(state, target)
        manifest = publisher.publish(state, window, delta)
        assert manifest.delta_key is not None and manifest.patch_key is None
        deltas.append(delta)
    return deltas


def _s3(server: MotoServer) -> S3Store:
    config = StorageConfig(bucket=f"beam-delta-{next(_buckets)}", endpoint_url=server.endpoint_url,
                           backoff_base_s=0.01, backoff_max_s=0.05)  # fmt: skip
    store = S3Store.from_config(config, server.environ())
    store.ensure_bucket()
    return store


def _keys(store: ObjectStore, kind: ObjectKind) -> list[str]:
    return sorted(i.key for i in store.list("") if f"/{kind.value}/" in i.key)


def test_peer_rebuilds_the_holders_weights_bit_for_bit(holder: Keypair) -> None:
    store = CountingStore(MemoryStore())
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=10)
    state0 = model_state(build_model("tiny", seed=0))
    _history(publisher, 3)
    assert _keys(store, ObjectKind.MODEL_PATCH) == []  # deltas replace patches
    assert len(_keys(store, ObjectKind.MODEL_DELTA)) == 3
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    store.gets.clear()
    state, manifest = syncer.sync(state0, 0)
    assert syncer.last_path == "patches" and syncer.last_fallback is None
    assert state_digest(state).hex() == manifest.digest
    assert state_digest(state) == state_digest(publisher.latest_state)
    assert not any("/checkpoint/" in key for key in store.gets)


# A peer's CPU may run other kernels than the holder's: ATen's generic ones, MKL without AVX-512.
OTHER_PATHS = [
    {"ATEN_CPU_CAPABILITY": "default"},
    {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
]
REBUILD = """
import sys, torch
from subnet.compression import CompressionConfig, state_digest
from subnet.versions.delta import SparseDelta, apply_delta, decode_delta
saved = torch.load(sys.argv[1])
state = saved["state"]
for codec, payload in saved["deltas"]:
    delta = SparseDelta(CompressionConfig.model_validate(codec), payload)
    state = apply_delta(state, decode_delta(delta, {k: tuple(v.shape) for k, v in state.items()}))
print(state_digest(state).hex())
"""


@pytest.mark.parametrize("env", OTHER_PATHS, ids=["aten-default", "aten-default-mkl-avx2"])
def test_a_peer_on_another_kernel_path_rebuilds_the_same_bits(
    holder: Keypair, tmp_path, env: dict[str, str]
) -> None:
    """The digest is checked bit for bit, so the rebuild must not depend on the peer's CPU: run
    it in a process on another kernel path than the holder's (this one)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    publisher = VersionPublisher(MemoryStore(), holder, RUN, checkpoint_every=10)
    state0 = model_state(build_model("tiny", seed=0))
    deltas = _history(publisher, 3, budget=4)
    torch.save(
        {"state": state0, "deltas": [(d.codec.model_dump(), d.payload) for d in deltas]},
        tmp_path / "history.pt",
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", REBUILD, str(tmp_path / "history.pt")],
        env={**os.environ, **env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == state_digest(publisher.latest_state).hex()


def test_delta_is_one_uploads_size_whatever_the_number_of_uploads() -> None:
    """Eight uploads merge to a union ~8x one support; the delta keeps one upload's budget."""
    codec = CompressionConfig(name="sparseloco", topk=8, chunk=16)  # fixed-size payloads
    state = model_state(build_model("tiny", seed=0))
    compressor = build_compressor(codec)
    one_upload = payload_nbytes(compressor.encode(state))
    sizes = []
    for uploads in (1, 8):
        step = _merged_step(state, uploads, seed=uploads)
        _, delta = Resparsifier(codec).reduce(state, {k: state[k] - step[k] for k in state})
        sizes.append(payload_nbytes(delta.payload))
    assert sizes == [one_upload, one_upload]


def test_a_budget_keeps_that_many_times_the_uploads_top_k_per_chunk() -> None:
    """Known answer: budget b keeps min(b * topk, chunk * chunk) values per full chunk, so the
    delta's support is b times one upload's (up to the cap) and it leaves less behind."""
    assert delta_codec(CODEC, 1) == CODEC
    assert delta_codec(CODEC, 4).topk == 32
    assert delta_codec(CODEC, 64).topk == 16 * 16  # a whole chunk
    with pytest.raises(ValueError, match="budget"):
        delta_codec(CODEC, 0)
    state = model_state(build_model("tiny", seed=0))
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    step = _merged_step(state, 8, seed=3)
    target = {k: state[k] - step[k] for k in state}
    supports, left = [], []
    for budget in (1, 4):
        spars = Resparsifier(CODEC, budget)
        _, delta = spars.reduce(state, target)
        supports.append(build_compressor(delta.codec).support(delta.payload, shapes).size)
        left.append(sum(float(t.norm()) ** 2 for t in spars.state_dict().values()))
    layouts = [ChunkLayout.of(s, CODEC.chunk) for s in shapes.values()]
    expected = [sum(layout.total_kept(k) for layout in layouts) for k in (8, 32)]
    assert supports == expected
    assert left[1] < left[0]


def test_peer_rebuilds_a_budget_4_history_bit_for_bit(holder: Keypair) -> None:
    """The manifest carries the delta's codec: a peer decodes 4x deltas without being told."""
    store = MemoryStore()
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=10)
    state0 = model_state(build_model("tiny", seed=0))
    deltas = _history(publisher, 3, uploads=8, budget=4)
    assert {d.codec.topk for d in deltas} == {32}
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    state, manifest = syncer.sync(state0, 0)
    assert syncer.last_path == "patches" and syncer.last_fallback is None
    assert state_digest(state) == state_digest(publisher.latest_state)


def test_peer_rebuilds_a_model_wide_fractional_budget_history_bit_for_bit(
    holder: Keypair,
) -> None:
    """Budget 1.5 over the whole model (`sparse-global-rice`, 12 values per 256 on average,
    wherever the step is largest), decay 0.5: the manifest names the codec, the peer follows."""
    store = MemoryStore()
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=10)
    state0 = model_state(build_model("tiny", seed=0))
    deltas = _history(publisher, 3, uploads=8, budget=1.5, scope="model", decay=0.5)
    assert {(d.codec.name, d.codec.topk) for d in deltas} == {("sparse-global-rice", 12)}
    shapes = {k: tuple(v.shape) for k, v in state0.items()}
    budget = sum(ChunkLayout.of(s, CODEC.chunk).total_kept(12) for s in shapes.values())
    for d in deltas:
        assert build_compressor(d.codec).support(d.payload, shapes).size == budget
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    state, _ = syncer.sync(state0, 0)
    assert syncer.last_path == "patches" and syncer.last_fallback is None
    assert state_digest(state) == state_digest(publisher.latest_state)
    with pytest.raises(ValueError, match="scope"):
        delta_codec(CODEC, 1, "row")


def test_the_holders_decay_forgets_that_share_of_what_a_delta_left_out() -> None:
    """Known answer: with decay d the next delta starts from d times the residual."""
    state = model_state(build_model("tiny", seed=0))
    spars = Resparsifier(CODEC, decay=0.5)
    step = _merged_step(state, 8, seed=0)
    published, _ = spars.reduce(state, {k: state[k] - step[k] for k in state})
    left = spars.state_dict()
    again, _ = spars.reduce(published, published)
    for name, residual in spars.state_dict().items():
        applied = published[name] - again[name]
        torch.testing.assert_close(residual + applied, 0.5 * left[name], rtol=0, atol=1e-6)


def test_error_feedback_sends_what_a_delta_left_out() -> None:
    """Known answer: after publishing `reduce(base, target)`, the residual is exactly the part
    of `base - target` not applied, and the next delta starts from it."""
    state = model_state(build_model("tiny", seed=0))
    spars = Resparsifier(CODEC)
    step = _merged_step(state, 8, seed=0)
    published, _ = spars.reduce(state, {k: state[k] - step[k] for k in state})
    for name, residual in spars.state_dict().items():
        applied = state[name] - published[name]
        torch.testing.assert_close(residual + applied, step[name], rtol=0, atol=1e-6)
    # Nothing to merge next round: the delta is the leftover, so the model still moves.
    again, _ = spars.reduce(published, published)
    assert state_digest(again) != state_digest(published)


def test_digest_mismatch_falls_back_to_the_checkpoint(
    moto_server: MotoServer, holder: Keypair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine's arithmetic (one bit off) fails the digest: the checkpoint is loaded."""
    store = _s3(moto_server)
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=2)
    _history(publisher, 2)  # v1 delta, v2 delta + checkpoint
    v1 = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX).sync_to(
        _manifest(store, holder, 1), None, None)[0]  # fmt: skip

    def off_by_one_bit(state: dict[str, Tensor], decoded: dict[str, Tensor]) -> dict[str, Tensor]:
        out = apply_delta(state, decoded)
        name = sorted(out)[0]
        out[name].view(-1).view(torch.int32)[0] ^= 1
        return out

    monkeypatch.setattr("subnet.versions.sync.apply_delta", off_by_one_bit)
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    state, manifest = syncer.sync(v1, 1)
    assert syncer.last_fallback is not None and syncer.last_fallback.reason == "digest_mismatch"
    assert syncer.last_path == "checkpoint" and manifest.checkpoint_version == 2
    assert state_digest(state) == state_digest(publisher.latest_state)


def test_missing_delta_falls_back_to_the_checkpoint(
    moto_server: MotoServer, holder: Keypair
) -> None:
    store = _s3(moto_server)
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=3)
    _history(publisher, 4)  # checkpoints at 0 and 3; the peer at 1 needs deltas 2, 3, 4
    v1 = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX).sync_to(
        _manifest(store, holder, 1), None, None)[0]  # fmt: skip
    store.delete(layout.delta_key(RUN, holder.ss58_address, 2))
    syncer = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    state, manifest = syncer.sync(v1, 1)
    assert syncer.last_fallback is not None and syncer.last_fallback.reason == "missing_version"
    assert (syncer.last_path, manifest.version, manifest.checkpoint_version) == ("checkpoint", 4, 3)
    assert state_digest(state) == state_digest(publisher.latest_state)


def test_joiner_starts_from_checkpoint_k(moto_server: MotoServer, holder: Keypair) -> None:
    """A fresh peer reads checkpoint K and the deltas after it, nothing older."""
    store = CountingStore(_s3(moto_server))
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=3)
    _history(publisher, 5)  # checkpoint 3, deltas 4 and 5 after it
    store.gets.clear()
    joiner = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX)
    state, manifest = joiner.sync(None, None)
    assert (joiner.last_path, manifest.checkpoint_version) == ("checkpoint", 3)
    assert state_digest(state) == state_digest(publisher.latest_state)
    read = {(p.kind.value, p.window) for p in map(parse_key, store.gets) if p.window is not None}
    assert {kind for kind, v in read if v < 3} <= {"model-manifest"}
    assert {("checkpoint", 3), ("model-delta", 4), ("model-delta", 5)} <= read


def test_publisher_refuses_a_delta_that_does_not_rebuild_the_state(holder: Keypair) -> None:
    """A delta against another base (a holder bug) is replaced by a lossless patch."""
    store = MemoryStore()
    publisher = VersionPublisher(store, holder, RUN, checkpoint_every=10)
    state = model_state(build_model("tiny", seed=0))
    publisher.publish(state, -1)
    step = _merged_step(state, 2, seed=3)
    published, delta = Resparsifier(CODEC).reduce(state, {k: state[k] - step[k] for k in state})
    nudged = {k: v + 1e-3 for k, v in published.items()}
    manifest = publisher.publish(nudged, 0, delta)
    assert manifest.delta_key is None and manifest.patch_key is not None
    synced, _ = ModelSync(store, holder.ss58_address, RUN, max_bytes=MAX).sync(state, 0)
    assert state_digest(synced) == state_digest(nudged)


def test_manifest_names_one_link_and_a_delta_its_codec() -> None:
    base = {"version": 1, "window": 0, "digest": "0" * 64, "checkpoint_version": 0,
            "checkpoint_key": "c"}  # fmt: skip
    with pytest.raises(ValueError, match="one patch or delta"):
        ModelManifest(**base, patch_key="p", delta_key="d", delta_codec=CODEC)
    with pytest.raises(ValueError, match="names its codec"):
        ModelManifest(**base, patch_key=None, delta_key="d")
    assert ModelManifest(**base, patch_key=None, delta_key="d", delta_codec=CODEC).delta_key


def test_a_dense_codec_never_decodes_a_delta() -> None:
    state = model_state(build_model("tiny", seed=0))
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    dense = SparseDelta(CompressionConfig(name="dense-fp32"), {})
    with pytest.raises(delta_module.DeltaError, match="not a sparse codec"):
        delta_module.decode_delta(dense, shapes)
    assert uses_sparse_broadcast("auto", CODEC)
    assert not uses_sparse_broadcast("auto", CompressionConfig(name="dense-fp32"))
    assert not uses_sparse_broadcast("patch", CODEC)
    with pytest.raises(ValueError, match="needs a sparse codec"):
        uses_sparse_broadcast("sparse", CompressionConfig(name="int8"))


def _manifest(store: ObjectStore, holder: Keypair, version: int) -> ModelManifest:
    from subnet.versions import read_manifest

    return read_manifest(store, RUN, holder.ss58_address, version)
