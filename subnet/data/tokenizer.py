"""Byte-level BPE tokenizer, trained deterministically on the corpus with `tokenizers`.

Why a trained tokenizer rather than GPT-2's: the network model's vocabulary is exactly 50,000
(GPT-2's is 50,257), the CPU presets want a much smaller one (the output layer dominates their
step), and a tokenizer fitted to the corpus compresses it better. Byte-level BPE has no unknown
tokens, so any user corpus works. Training is single-pass over fixed input in a fixed order and
`to_str()` is canonical, so the same corpus and size give the same file and sha256 everywhere.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOT = "<|endoftext|>"
"""Separator between documents; id 0, the only special token."""

MIN_VOCAB = 257  # the 256 byte symbols + EOT


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE with exactly `vocab_size` tokens (if the corpus has enough pairs).

    Raises:
        ValueError: `vocab_size` is below the 256 bytes plus the EOT token.
    """
    if vocab_size < MIN_VOCAB:
        raise ValueError(f"vocab_size must be at least {MIN_VOCAB}, got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        # All 256 byte symbols up front, so text the corpus never showed still encodes.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=sys.stderr.isatty(),
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def tokenizer_bytes(tokenizer: Tokenizer) -> bytes:
    """The canonical serialized form: what is stored and hashed."""
    return tokenizer.to_str().encode("utf-8")


def tokenizer_sha256(tokenizer: Tokenizer) -> str:
    """sha256 hex of `tokenizer_bytes`: the tokenizer's identity in the manifest."""
    return hashlib.sha256(tokenizer_bytes(tokenizer)).hexdigest()


def tokenizer_from_bytes(data: bytes) -> Tokenizer:
    """Load a tokenizer stored with `tokenizer_bytes`."""
    return Tokenizer.from_str(data.decode("utf-8"))


def eot_id(tokenizer: Tokenizer) -> int:
    """Id of the document separator."""
    token_id = tokenizer.token_to_id(EOT)
    if token_id is None:
        raise ValueError(f"tokenizer has no {EOT} token")
    return token_id
