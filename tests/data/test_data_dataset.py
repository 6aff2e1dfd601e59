"""Reading datasets: sample windows, batches, held-out data, and integrity checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from subnet.data import DatasetError, TokenDataset, assign_samples, sample_receipt
from subnet.model import build_model, evaluate_loss

SEQ = 64


@pytest.fixture
def dataset_copy(tiny_dataset_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    shutil.copytree(tiny_dataset_dir, out)
    return out


def _train_stream(folder: Path, ds: TokenDataset) -> np.ndarray:
    return np.concatenate(
        [
            np.frombuffer((folder / s.key).read_bytes(), "<u2")
            for s in ds.manifest.splits["train"].shards
        ]
    )


def test_samples_are_overlapping_windows_of_the_stream(tiny_dataset_dir: Path) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=SEQ)
    stream = _train_stream(tiny_dataset_dir, ds)
    assert ds.n_samples == (len(stream) - 1) // SEQ
    # 4096-token shards and 64-token samples: sample 63 ends exactly on a boundary; pick one across.
    boundary = ds.manifest.splits["train"].shards[0].tokens
    crossing = boundary // SEQ - 1 if boundary % SEQ == 0 else boundary // SEQ
    for i in (0, 1, crossing, ds.n_samples - 1):
        assert np.array_equal(ds.sample(i), stream[i * SEQ : i * SEQ + SEQ + 1])
    with pytest.raises(IndexError):
        ds.sample(ds.n_samples)


def test_batches_shift_targets_by_one(tiny_dataset_dir: Path) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=SEQ)
    ids = assign_samples(0, 0, "miner", 10, ds.n_samples)
    batches = list(ds.batches(ids, batch_size=4))
    assert [tuple(x.shape) for x, _ in batches] == [(4, SEQ), (4, SEQ), (2, SEQ)]
    x, y = batches[0]
    assert x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert np.array_equal(x[0].numpy(), ds.sample(ids[0])[:-1])
    assert len(sample_receipt(ids)) == 64


def test_heldout_is_fixed_and_differs_from_train(tiny_dataset_dir: Path) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=SEQ)
    first = [x for x, _ in ds.heldout_batches(batch_size=4, max_batches=2)]
    again = [x for x, _ in ds.heldout_batches(batch_size=4, max_batches=2)]
    assert len(first) == 2 and all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], ds.batch(range(4))[0])
    with pytest.raises(DatasetError, match="fewer than"):
        TokenDataset.from_folder(tiny_dataset_dir, seq_len=10**6).heldout_batches(1)


def test_model_trains_on_dataset_batches(tiny_dataset_dir: Path) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=SEQ)
    model = build_model("tiny", vocab_size=ds.vocab_size, seed=0)
    before = evaluate_loss(model, ds.heldout_batches(batch_size=8, max_batches=2))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for x, y in ds.batches(assign_samples(0, 0, "m", 160, ds.n_samples), batch_size=8):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert evaluate_loss(model, ds.heldout_batches(batch_size=8, max_batches=2)) < before - 0.5


def test_corrupted_shard_is_rejected(dataset_copy: Path) -> None:
    ds = TokenDataset.from_folder(dataset_copy, seq_len=SEQ)
    shard = dataset_copy / ds.manifest.splits["train"].shards[1].key
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    ds.sample(0)  # shard 0 is intact and loads lazily
    with pytest.raises(DatasetError, match=r"train-00001\.bin is corrupted: sha256"):
        ds.sample(ds.manifest.splits["train"].shards[0].tokens // SEQ + 1)
    with pytest.raises(DatasetError, match="corrupted"):
        ds.verify()


def test_truncated_and_missing_files_are_rejected(dataset_copy: Path) -> None:
    ds = TokenDataset.from_folder(dataset_copy, seq_len=SEQ)
    shard = dataset_copy / ds.manifest.splits["train"].shards[0].key
    shard.write_bytes(shard.read_bytes()[:-2])
    with pytest.raises(DatasetError, match="bytes, manifest says"):
        ds.sample(0)
    shard.unlink()
    with pytest.raises(DatasetError, match="missing"):
        ds.sample(0)
    (dataset_copy / "tokenizer.json").write_text("{}")
    with pytest.raises(DatasetError, match=r"tokenizer\.json is corrupted"):
        ds.tokenizer()


def test_missing_or_invalid_manifest(tmp_path: Path, dataset_copy: Path) -> None:
    with pytest.raises(DatasetError, match="no manifest.json"):
        TokenDataset.from_folder(tmp_path / "nothing", seq_len=SEQ)
    (dataset_copy / "manifest.json").write_text('{"format": "beam-tokens/1"}')
    with pytest.raises(DatasetError, match="invalid manifest.json"):
        TokenDataset.from_folder(dataset_copy, seq_len=SEQ)


def test_shard_cache_is_bounded(tiny_dataset_dir: Path) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=SEQ, max_cached_shards=1)
    ds.verify()
    assert len(ds._cache) == 1
