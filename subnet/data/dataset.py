"""Reading a dataset: verified shards, fixed-length samples, (x, y) batches.

A sample is a window of ``seq_len + 1`` tokens of a split's token stream: sample ``i`` starts at
token ``i * seq_len``, so consecutive samples share one token and every token after the first is a
target exactly once. Samples cross shard and document boundaries freely (documents are separated by
EOT, as in GPT-2 training). Sample ids are what `subnet.data.assignment` hands out.

Shards are fetched lazily from the `Source` and checked against the manifest's sha256 before use,
so a miner only downloads the shards its assignment touches and a corrupted or tampered shard is an
error, never training data.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from pydantic import ValidationError
from tokenizers import Tokenizer

from subnet.data.manifest import MANIFEST_KEY, Manifest, ShardInfo, SplitInfo
from subnet.data.sink import LocalFolder, Source
from subnet.data.tokenizer import tokenizer_from_bytes

Batch = tuple[torch.Tensor, torch.Tensor]
"""(x, y): int64 token ids [B, T]; y is x shifted left by one."""


class DatasetError(ValueError):
    """The dataset is missing, malformed or does not match its manifest."""


class TokenDataset:
    """A tokenized dataset read through a `Source`, cut into samples of `seq_len` + 1 tokens.

    Args:
        source: where the manifest, tokenizer and shards live (a `LocalFolder`, an object-store
            prefix, ...).
        seq_len: T, the model's training sequence length; part of the protocol, since sample ids
            only mean the same thing to peers that agree on it.
        max_cached_shards: keep at most this many decoded shards in memory (None: all).
    """

    def __init__(
        self, source: Source, seq_len: int, *, max_cached_shards: int | None = None
    ) -> None:
        if seq_len <= 0:
            raise ValueError("seq_len must be positive")
        try:
            self.manifest = Manifest.from_bytes(source.get(MANIFEST_KEY))
        except (KeyError, FileNotFoundError) as e:
            raise DatasetError(f"no {MANIFEST_KEY} in {source!r}") from e
        except ValidationError as e:
            raise DatasetError(f"invalid {MANIFEST_KEY} in {source!r}: {e}") from e
        self.source = source
        self.seq_len = seq_len
        self.max_cached_shards = max_cached_shards
        self._dtype = np.dtype(self.manifest.dtype).newbyteorder("<")
        self._starts = {
            name: np.cumsum([0] + [s.tokens for s in split.shards]).tolist()
            for name, split in self.manifest.splits.items()
        }
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @classmethod
    def from_folder(cls, path: str | Path, seq_len: int, **kwargs: int | None) -> TokenDataset:
        """Open a dataset written to a local folder."""
        return cls(LocalFolder(path), seq_len, **kwargs)

    @property
    def vocab_size(self) -> int:
        """Size of the tokenizer's vocabulary; a model needs at least this many embeddings."""
        return self.manifest.tokenizer.vocab_size

    @property
    def n_samples(self) -> int:
        """Number of train samples: the `n_total` for `assign_samples`."""
        return self.split_samples("train")

    def split_samples(self, split: str) -> int:
        """Number of whole samples in `split`."""
        return max(0, (self._split(split).tokens - 1) // self.seq_len)

    def files(self, split: str = "train") -> list[str]:
        """The keys of ``split``'s shard files, in manifest (token stream) order."""
        return [shard.key for shard in self._split(split).shards]

    def samples_in_files(self, first: int, end: int, split: str = "train") -> range:
        """Ids of the samples whose ``seq_len + 1`` tokens all lie in files ``[first, end)``
        of ``split`` (a sample across the edge of the span belongs to neither side)."""
        starts = self._starts[split]
        lo, hi = starts[first], starts[end]
        first_id = -(-lo // self.seq_len)  # the first sample starting at or after ``lo``
        last_id = (hi - 1) // self.seq_len - 1  # the last whose final token is before ``hi``
        return range(first_id, max(first_id, last_id + 1))

    def files_of(self, sample_ids: Sequence[int], split: str = "train") -> list[str]:
        """The keys of the shard files the tokens of ``sample_ids`` come from, sorted."""
        shards, starts = self._split(split).shards, self._starts[split]
        keys: set[str] = set()
        for sample_id in sample_ids:
            start = sample_id * self.seq_len
            first = bisect.bisect_right(starts, start) - 1
            last = bisect.bisect_right(starts, start + self.seq_len) - 1
            keys.update(shards[i].key for i in range(first, min(last, len(shards) - 1) + 1))
        return sorted(keys)

    def tokenizer(self) -> Tokenizer:
        """The dataset's tokenizer, checked against the manifest's sha256."""
        info = self.manifest.tokenizer
        return tokenizer_from_bytes(self._fetch_verified(info.key, info.sha256, None))

    def sample(self, sample_id: int, split: str = "train") -> np.ndarray:
        """Tokens of one sample: ``seq_len + 1`` ids starting at ``sample_id * seq_len``."""
        if not 0 <= sample_id < self.split_samples(split):
            raise IndexError(
                f"sample {sample_id} out of range for {split} ({self.split_samples(split)})"
            )
        start, stop = sample_id * self.seq_len, sample_id * self.seq_len + self.seq_len + 1
        shards, starts = self._split(split).shards, self._starts[split]
        pieces = []
        index = bisect.bisect_right(starts, start) - 1
        while start < stop:
            ids = self._shard(shards[index])
            offset = start - starts[index]
            piece = ids[offset : offset + stop - start]
            pieces.append(piece)
            start += len(piece)
            index += 1
        return np.concatenate(pieces)

    def batch(self, sample_ids: Sequence[int], split: str = "train") -> Batch:
        """(x, y) for `sample_ids` in the given order: int64 tensors of shape [len(ids), seq_len]."""
        windows = np.stack([self.sample(i, split) for i in sample_ids]).astype(np.int64)
        tokens = torch.from_numpy(windows)
        return tokens[:, :-1], tokens[:, 1:]

    def batches(
        self, sample_ids: Sequence[int], batch_size: int, split: str = "train"
    ) -> Iterator[Batch]:
        """`sample_ids` in order, `batch_size` at a time (the last batch may be smaller)."""
        for start in range(0, len(sample_ids), batch_size):
            yield self.batch(sample_ids[start : start + batch_size], split)

    def heldout_batches(self, batch_size: int, max_batches: int | None = None) -> Iterator[Batch]:
        """Held-out samples in a fixed order, so every validator evaluates on the same tokens."""
        n = self.split_samples("heldout")
        if n == 0:
            raise DatasetError(f"held-out split has fewer than {self.seq_len + 1} tokens")
        if max_batches is not None:
            n = min(n, max_batches * batch_size)
        return self.batches(range(n), batch_size, "heldout")

    def verify(self) -> None:
        """Fetch and check every shard and the tokenizer now, instead of lazily."""
        self.tokenizer()
        for split in self.manifest.splits.values():
            for shard in split.shards:
                self._shard(shard)

    def _split(self, split: str) -> SplitInfo:
        if split not in self.manifest.splits:
            raise KeyError(f"no split {split!r}; have {sorted(self.manifest.splits)}")
        return self.manifest.splits[split]

    def _shard(self, shard: ShardInfo) -> np.ndarray:
        if shard.key in self._cache:
            self._cache.move_to_end(shard.key)
            return self._cache[shard.key]
        data = self._fetch_verified(shard.key, shard.sha256, shard.tokens * self._dtype.itemsize)
        ids = np.frombuffer(data, dtype=self._dtype)
        self._cache[shard.key] = ids
        if self.max_cached_shards is not None and len(self._cache) > self.max_cached_shards:
            self._cache.popitem(last=False)
        return ids

    def _fetch_verified(self, key: str, sha256: str, size: int | None) -> bytes:
        try:
            data = self.source.get(key)
        except (KeyError, FileNotFoundError) as e:
            raise DatasetError(
                f"{key} is listed in the manifest but missing from {self.source!r}"
            ) from e
        if size is not None and len(data) != size:
            raise DatasetError(f"{key} has {len(data)} bytes, manifest says {size}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise DatasetError(f"{key} is corrupted: sha256 {actual}, manifest says {sha256}")
        return data
