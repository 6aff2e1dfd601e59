"""A miner's answer to a check: the drawn chunks of its error feedback before and after the
window, each proven against the roots its upload committed to.

Payload (safetensors, every size fixed by the chunk sample, so a reader knows the exact byte
count before it downloads):

* ``in``  -- float32, the drawn chunks of the error feedback it trained from, concatenated in
  ascending chunk order (absent when it trained from a fresh, all-zero one);
* ``out`` -- float32, the same chunks of the error feedback it kept;
* ``proof_in``, ``proof_out`` -- uint8, ``depth`` sibling digests of 32 bytes per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from subnet.verify import merkle
from subnet.verify.chunks import FRESH, ChunkMap

HEADROOM = 4096  # bytes an answer envelope may take beyond its tensors (header, table)


class BadAnswer(ValueError):
    """An answer that does not fit its check or does not prove its chunks; ``reason`` says how."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class Answer:
    """The drawn chunks, parsed and proven."""

    ef_in: list[torch.Tensor]
    ef_out: list[torch.Tensor]


def encode_answer(
    chunks: ChunkMap,
    ids: list[int],
    before: dict[str, torch.Tensor],
    after: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """The answer's tensors for chunks ``ids`` of the states ``before`` and ``after``."""
    out: dict[str, torch.Tensor] = {}
    for part, state in (("in", before), ("out", after)):
        if part == "in" and not state:
            continue
        values = chunks.chunks(state, ids)
        leaves = chunks.leaves(state)
        paths = merkle.proofs(leaves, ids)
        out[part] = torch.cat(values) if values else torch.zeros(0)
        blob = b"".join(b"".join(path) for path in paths)
        out[f"proof_{part}"] = torch.frombuffer(bytearray(blob), dtype=torch.uint8).clone()
    return out


def answer_bytes(chunks: ChunkMap, ids: list[int], fresh: bool) -> int:
    """The most an answer's envelope may take."""
    parts = 1 if fresh else 2
    return parts * (4 * chunks.numel(ids) + merkle.DIGEST * chunks.depth * len(ids)) + HEADROOM


def parse_answer(
    chunks: ChunkMap, ids: list[int], tensors: dict[str, torch.Tensor], ef_in: str, ef_out: str
) -> Answer:
    """Check an answer's parts against chunks ``ids`` and the committed roots (``ef_in`` may be
    ``FRESH``: the chunks before are then zeros). Raises :class:`BadAnswer`."""
    fresh = ef_in == FRESH
    want = {"out", "proof_out"} | (set() if fresh else {"in", "proof_in"})
    if set(tensors) != want:
        raise BadAnswer("check_bad_answer", f"parts {sorted(tensors)}, expected {sorted(want)}")
    sizes = [chunks.refs[i][2] for i in ids]
    parsed: dict[str, list[torch.Tensor]] = {}
    for part, commitment in (("in", ef_in), ("out", ef_out)):
        if part == "in" and fresh:
            parsed[part] = [torch.zeros(s) for s in sizes]
            continue
        values, proof = tensors[part], tensors[f"proof_{part}"]
        if values.dtype != torch.float32 or values.dim() != 1 or values.numel() != sum(sizes):
            raise BadAnswer("check_bad_answer", f"{part}: not {sum(sizes)} float32 values")
        plen = merkle.DIGEST * chunks.depth
        if proof.dtype != torch.uint8 or proof.dim() != 1 or proof.numel() != plen * len(ids):
            raise BadAnswer("check_bad_answer", f"proof_{part}: not {plen * len(ids)} bytes")
        if not bool(torch.isfinite(values).all()):
            raise BadAnswer("check_bad_answer", f"{part}: a value that is not finite")
        try:
            expected = bytes.fromhex(commitment)
        except ValueError:
            raise BadAnswer("check_bad_answer", f"ef_{part} is not a root") from None
        blob = proof.numpy().tobytes()
        split = list(torch.split(values, sizes))
        for j, (i, chunk) in enumerate(zip(ids, split, strict=True)):
            start = j * chunks.depth * merkle.DIGEST
            path = [
                blob[start + d * merkle.DIGEST : start + (d + 1) * merkle.DIGEST]
                for d in range(chunks.depth)
            ]
            if not merkle.verify(chunks.leaf(i, chunk), i, path, chunks.n, expected):
                raise BadAnswer(
                    "check_bad_proof", f"chunk {i} of ef_{part} is not the committed one"
                )
        parsed[part] = [c.clone() for c in split]
    return Answer(parsed["in"], parsed["out"])
