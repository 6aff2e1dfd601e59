"""What goes on the wire, pinned: an upload, a score report and a check notice, each with every
field its typed message has, must read back as they did when the digests below were taken.

Two parts of an envelope's bytes are not the same from one encoding to the next, and are left
out: the signature (sr25519 signs with fresh randomness) and the order of the payload's
metadata keys (safetensors writes them from a hash map), with the payload digest the header
carries. What is pinned is everything else, in a fixed order: the prefix and every other header
field, the metadata keys and values, each tensor's name, dtype, shape and bytes. A change that
moves any of it fails here: if it is meant, it is a protocol change (a ``PROTOCOL_VERSION`` bump
and a row in docs/protocol.md), and the digests are taken again."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from bittensor.sp_core import Keypair

from subnet.storage.keys import ObjectKind
from subnet.wire import (
    CheckNotice,
    Expected,
    GradientMeta,
    ScoreReportMeta,
    encode_envelope,
    verify_envelope,
)
from subnet.wire.envelope import _PREFIX

MINER = Keypair.create_from_seed(bytes(range(32)))
OTHER = Keypair.create_from_seed(bytes(range(1, 33)))
ROOT = "ab" * 32

MESSAGES = {
    "gradient": (
        ObjectKind.GRADIENT,
        GradientMeta(
            receipt="cd" * 32,
            samples=64,
            steps=8,
            tokens=4096,
            loss=3.5,
            threads=2,
            ranks=1,
            replay_class="cpu-avx2-mkl.avx2/fp32/torch2.13.0+cpu",
            state_in=ROOT,
            state_from=4,
            state_out="ef" * 32,
        ),
    ),
    "scores": (
        ObjectKind.SCORES,
        ScoreReportMeta(
            scores={MINER.ss58_address: 0.5, OTHER.ss58_address: 0.25},
            digests={MINER.ss58_address: ROOT},
        ),
    ),
    "notice": (
        ObjectKind.CHECKS,
        CheckNotice(
            targets=(MINER.ss58_address,), covers=("cpu-avx2-mkl.avx2/fp32/torch2.13.0+cpu",)
        ),
    ),
}

# ``canonical_digest`` of each, taken when the roles were split into components (issue 44): the
# same on the code before the split and after it.
PINNED = {
    "gradient": "1953268d5ab3c19d11c8155046c198fb141db5ad7c1ed9e0623fa4158fcad5c6",
    "scores": "6e119f3a93bf15b95df82a518e01042705842f286432c4ccc74b0981b0b9f50f",
    "notice": "58e4227535f2a94fd778aa0089501faf57e877b9ef2daa7e734cfaef16a7c64f",
}


def canonical_digest(name: str, blob: bytes) -> str:
    """sha256 of what the envelope says, in a fixed order (the module doc)."""
    kind = MESSAGES[name][0]
    expected = Expected("run-1", 5, kind, MINER.ss58_address, base_version=3)
    envelope = verify_envelope(blob, expected, None, max_bytes=len(blob))
    header = envelope.header.model_dump(mode="json", exclude={"payload_sha256"})
    parts = [
        blob[: _PREFIX.size - 4],  # magic and layout version (the header length varies with it)
        json.dumps(header, sort_keys=True).encode(),
        json.dumps(dict(sorted(envelope.metadata.items()))).encode(),
    ]
    for tensor_name, tensor in sorted(envelope.tensors.items()):
        parts.append(f"{tensor_name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        parts.append(tensor.contiguous().view(torch.uint8).numpy().tobytes())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def encoded(name: str) -> bytes:
    """The named message's envelope, in window 5 on base version 3 of run ``run-1``."""
    kind, meta = MESSAGES[name]
    g = torch.Generator().manual_seed(0)
    tensors = {"values": torch.randn(16, generator=g), "codes": torch.arange(8, dtype=torch.uint8)}
    return encode_envelope(
        signer=MINER,
        run="run-1",
        kind=kind,
        window=5,
        tensors=tensors,
        base_version=3,
        metadata=meta.wire(),
        plan="0123456789abcdef",
    )


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_the_wire_bytes_are_the_pinned_ones(name: str) -> None:
    assert canonical_digest(name, encoded(name)) == PINNED[name]
