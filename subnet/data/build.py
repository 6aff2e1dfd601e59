"""Corpus -> tokenizer -> token shards + manifest, written through a `Sink`.

`build_dataset` is deterministic: the same documents and parameters give the same bytes (shards,
tokenizer, manifest) on every machine, so two operators who build the default dataset get the same
`Manifest.digest`. Objects are written shards first, manifest last, so a reader that finds a
manifest always finds everything it names.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Iterator, Sequence

import numpy as np
from loguru import logger
from pydantic import ValidationError
from tokenizers import Tokenizer
from tqdm import tqdm

from subnet.data.corpus import Document, corpus_digest, split_document
from subnet.data.manifest import (
    MANIFEST_KEY,
    BuildParams,
    Manifest,
    ShardInfo,
    SplitInfo,
    TokenizerInfo,
    token_dtype,
)
from subnet.data.sink import Sink, Source
from subnet.data.tokenizer import eot_id, tokenizer_bytes, tokenizer_sha256, train_tokenizer

TOKENIZER_KEY = "tokenizer.json"
SPLITS = ("train", "heldout")
_ENCODE_CHUNK = 16  # documents per encode_batch call: parallel inside, progress between


def build_params(
    documents: Sequence[Document],
    *,
    corpus: str,
    vocab_size: int,
    shard_tokens: int,
    heldout_fraction: float,
) -> BuildParams:
    """The parameters that determine a dataset's bytes (compared for idempotent rebuilds)."""
    return BuildParams(
        corpus=corpus,
        corpus_sha256=corpus_digest(list(documents)),
        documents=len(documents),
        vocab_size=vocab_size,
        shard_tokens=shard_tokens,
        heldout_fraction=heldout_fraction,
    )


def existing_manifest(source: Source, params: BuildParams) -> Manifest | None:
    """The manifest already at `source` if it was built with `params`, else None."""
    try:
        manifest = Manifest.from_bytes(source.get(MANIFEST_KEY))
    except (KeyError, FileNotFoundError):
        return None
    except ValidationError as e:
        logger.warning("ignoring unreadable {} in {!r}: {}", MANIFEST_KEY, source, e)
        return None
    return manifest if manifest.build == params else None


def build_dataset(
    documents: Sequence[Document], sink: Sink, params: BuildParams, *, name: str
) -> Manifest:
    """Train the tokenizer on the train split, tokenize both splits into shards, write everything.

    Returns the manifest that was written under `MANIFEST_KEY`.
    """
    if params.shard_tokens <= 0:
        raise ValueError("shard_tokens must be positive")
    split_texts: dict[str, list[str]] = {s: [] for s in SPLITS}
    for doc in documents:
        train, heldout = split_document(doc.text, params.heldout_fraction)
        split_texts["train"].append(train)
        split_texts["heldout"].append(heldout)

    started = time.perf_counter()
    tokenizer = train_tokenizer(split_texts["train"], params.vocab_size)
    if tokenizer.get_vocab_size() < params.vocab_size:
        logger.warning(
            "corpus too small for {} tokens: BPE stopped at {} (every word is one token)",
            params.vocab_size,
            tokenizer.get_vocab_size(),
        )
    logger.info("tokenizer trained in {:.1f}s", time.perf_counter() - started)

    dtype = token_dtype(tokenizer.get_vocab_size())
    splits = {
        split: _write_split(split, split_texts[split], tokenizer, dtype, sink, params.shard_tokens)
        for split in SPLITS
    }
    sink.put(TOKENIZER_KEY, tokenizer_bytes(tokenizer))
    manifest = Manifest(
        name=name,
        build=params,
        tokenizer=TokenizerInfo(
            key=TOKENIZER_KEY,
            sha256=tokenizer_sha256(tokenizer),
            vocab_size=tokenizer.get_vocab_size(),
            requested_vocab_size=params.vocab_size,
            eot_id=eot_id(tokenizer),
        ),
        dtype=dtype,
        splits=splits,
    )
    sink.put(MANIFEST_KEY, manifest.to_bytes())
    return manifest


def _write_split(
    split: str, texts: list[str], tokenizer: Tokenizer, dtype: str, sink: Sink, shard_tokens: int
) -> SplitInfo:
    """Tokenize `texts` into one EOT-separated stream and write it in shards of `shard_tokens`."""
    shards: list[ShardInfo] = []
    # Concatenate only when a shard is due, so the work stays linear in the corpus size.
    pending: list[np.ndarray] = []
    pending_tokens = 0
    for ids in _encode(split, texts, tokenizer, dtype):
        pending.append(ids)
        pending_tokens += len(ids)
        while pending_tokens >= shard_tokens:
            stream = np.concatenate(pending)
            shards.append(_put_shard(sink, split, len(shards), stream[:shard_tokens]))
            pending, pending_tokens = [stream[shard_tokens:]], len(stream) - shard_tokens
    if pending_tokens:
        shards.append(_put_shard(sink, split, len(shards), np.concatenate(pending)))
    return SplitInfo(tokens=sum(s.tokens for s in shards), shards=tuple(shards))


def _encode(split: str, texts: list[str], tokenizer: Tokenizer, dtype: str) -> Iterator[np.ndarray]:
    """Token ids per chunk of documents, each document followed by EOT."""
    eot = eot_id(tokenizer)
    with tqdm(
        total=len(texts), desc=f"tokenize {split}", unit="doc", disable=not sys.stderr.isatty()
    ) as bar:
        for start in range(0, len(texts), _ENCODE_CHUNK):
            chunk = [t for t in texts[start : start + _ENCODE_CHUNK] if t]
            ids: list[int] = []
            for encoding in tokenizer.encode_batch(chunk):
                ids.extend(encoding.ids)
                ids.append(eot)
            bar.update(min(_ENCODE_CHUNK, len(texts) - start))
            yield np.asarray(ids, dtype=dtype)


def _put_shard(sink: Sink, split: str, index: int, ids: np.ndarray) -> ShardInfo:
    """Write one shard as raw little-endian ids and describe it."""
    data = ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes()
    key = f"{split}-{index:05d}.bin"
    sink.put(key, data)
    return ShardInfo(key=key, tokens=len(ids), sha256=hashlib.sha256(data).hexdigest())
