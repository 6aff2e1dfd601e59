"""Dataset building: determinism, manifest contents, idempotency, sinks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from subnet.data import (
    MANIFEST_KEY,
    Document,
    LocalFolder,
    Manifest,
    Prefixed,
    TokenDataset,
    build_dataset,
    existing_manifest,
)
from subnet.data.manifest import BuildParams


def _file_hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _manifest(folder: Path) -> Manifest:
    return Manifest.from_bytes((folder / MANIFEST_KEY).read_bytes())


def test_same_inputs_give_identical_bytes(
    tiny_documents: list[Document], tiny_params: BuildParams, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    again = build_dataset(tiny_documents, LocalFolder(tmp_path), tiny_params, name="tiny")
    assert _file_hashes(tmp_path) == _file_hashes(tiny_dataset_dir)
    assert again.digest == _manifest(tiny_dataset_dir).digest


def test_manifest_describes_the_shards(tiny_params: BuildParams, tiny_dataset_dir: Path) -> None:
    manifest = _manifest(tiny_dataset_dir)
    assert manifest.build == tiny_params
    assert manifest.dtype == "uint16"
    assert manifest.tokenizer.vocab_size == tiny_params.vocab_size
    train = manifest.splits["train"]
    assert len(train.shards) > 2
    assert all(s.tokens == tiny_params.shard_tokens for s in train.shards[:-1])
    assert train.tokens == sum(s.tokens for s in train.shards)
    for shard in train.shards + manifest.splits["heldout"].shards:
        data = (tiny_dataset_dir / shard.key).read_bytes()
        assert len(data) == 2 * shard.tokens
        assert hashlib.sha256(data).hexdigest() == shard.sha256
    tokenizer = (tiny_dataset_dir / manifest.tokenizer.key).read_bytes()
    assert hashlib.sha256(tokenizer).hexdigest() == manifest.tokenizer.sha256


def test_shards_decode_back_to_the_text(
    tiny_documents: list[Document], tiny_dataset_dir: Path
) -> None:
    ds = TokenDataset.from_folder(tiny_dataset_dir, seq_len=64)
    tokenizer = ds.tokenizer()
    eot = ds.manifest.tokenizer.eot_id
    stream = np.concatenate([ds.sample(i)[:-1] for i in range(ds.n_samples)]).tolist()
    first_doc = tokenizer.decode(stream[: stream.index(eot)])
    assert tiny_documents[0].text.startswith(first_doc)
    assert len(first_doc) > 0.8 * len(tiny_documents[0].text)  # about 10% is held out


def test_existing_manifest_matches_only_the_same_params(
    tiny_params: BuildParams, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    store = LocalFolder(tiny_dataset_dir)
    assert existing_manifest(store, tiny_params) == _manifest(tiny_dataset_dir)
    other = tiny_params.model_copy(update={"vocab_size": tiny_params.vocab_size + 1})
    assert existing_manifest(store, other) is None
    assert existing_manifest(LocalFolder(tmp_path / "empty"), tiny_params) is None


class _MemoryStore:
    """An object-store stand-in: put/get on a dict."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def get(self, key: str) -> bytes:
        return self.objects[key]


def test_prefixed_store_receives_the_same_dataset(
    tiny_documents: list[Document], tiny_params: BuildParams, tiny_dataset_dir: Path
) -> None:
    store = _MemoryStore()
    build_dataset(tiny_documents, Prefixed(store, "datasets/tiny/"), tiny_params, name="tiny")
    assert all(k.startswith("datasets/tiny/") for k in store.objects)
    assert {k.removeprefix("datasets/tiny/") for k in store.objects} == {
        p.name for p in tiny_dataset_dir.iterdir()
    }
    remote = TokenDataset(Prefixed(store, "datasets/tiny"), seq_len=32)
    local = TokenDataset.from_folder(tiny_dataset_dir, seq_len=32)
    assert np.array_equal(remote.sample(5), local.sample(5))


def test_local_folder_refuses_keys_outside_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="escapes"):
        LocalFolder(tmp_path / "ds").put("../evil", b"x")
