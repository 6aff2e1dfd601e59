"""The dataset manifest: what a dataset prefix holds and how to check every byte of it.

Layout of a dataset prefix (a local folder or an object-store prefix)::

    manifest.json          this file, written last
    tokenizer.json         the tokenizer, sha256 in the manifest
    train-00000.bin ...    shards of token ids, raw little-endian `dtype`, sha256 each
    heldout-00000.bin ...

A split is one token stream cut into shards; documents are separated by the EOT token. The
manifest's own sha256 (`Manifest.digest`) names the whole dataset, so a protocol config can pin it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

FORMAT = "beam-tokens/1"
MANIFEST_KEY = "manifest.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShardInfo(_Strict):
    """One shard file: its key within the prefix, token count and sha256 of its bytes."""

    key: str
    tokens: int
    sha256: str


class SplitInfo(_Strict):
    """One split (train or heldout): its shards in stream order."""

    tokens: int
    shards: tuple[ShardInfo, ...]


class TokenizerInfo(_Strict):
    """The tokenizer's identity; `vocab_size` is what training reached (<= the size asked for)."""

    key: str
    sha256: str
    kind: Literal["bytelevel-bpe"] = "bytelevel-bpe"
    vocab_size: int
    requested_vocab_size: int
    eot_id: int


class BuildParams(_Strict):
    """Everything that determines the dataset's bytes; equal params mean nothing to rebuild."""

    corpus: str
    corpus_sha256: str
    documents: int
    vocab_size: int
    shard_tokens: int
    heldout_fraction: float


class Manifest(_Strict):
    """The dataset's table of contents (see the module docstring for the layout)."""

    format: Literal["beam-tokens/1"] = FORMAT
    name: str
    build: BuildParams
    tokenizer: TokenizerInfo
    dtype: Literal["uint16", "uint32"]
    splits: dict[str, SplitInfo]

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys), so equal manifests have equal bytes and digests."""
        return (json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        """Parse and validate a stored manifest."""
        return cls.model_validate_json(data)

    @property
    def digest(self) -> str:
        """sha256 hex of `to_bytes()`: the dataset's identity."""
        return hashlib.sha256(self.to_bytes()).hexdigest()


def token_dtype(vocab_size: int) -> Literal["uint16", "uint32"]:
    """The narrowest unsigned dtype that holds every token id."""
    return "uint16" if vocab_size <= 2**16 else "uint32"
