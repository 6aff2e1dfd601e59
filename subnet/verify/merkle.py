"""A fixed-depth Merkle tree over leaf digests: one 32-byte root commits to many chunks, and any
one chunk is proven against it with ``depth`` sibling digests.

The leaves are padded to the next power of two with a constant empty digest, so every proof has
the same length (no second-preimage games with odd levels: leaves and inner nodes are hashed
with different one-byte prefixes, as in RFC 6962).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

DIGEST = 32
_LEAF, _NODE = b"\x00", b"\x01"
EMPTY = hashlib.sha256(b"beam-merkle-empty-v1").digest()


def leaf_digest(data: bytes) -> bytes:
    """The digest of one leaf's bytes."""
    return hashlib.sha256(_LEAF + data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def depth_for(n: int) -> int:
    """Levels above the leaves for ``n`` leaves (0 for a single leaf)."""
    return max(0, (max(n, 1) - 1).bit_length())


def _levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the padded tree, leaves first."""
    width = 1 << depth_for(len(leaves))
    level = list(leaves) + [EMPTY] * (width - len(leaves))
    levels = [level]
    while len(level) > 1:
        level = [_node(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def root(leaves: Sequence[bytes]) -> bytes:
    """The root of ``leaves`` (leaf digests, in order)."""
    return _levels(leaves)[-1][0]


def proofs(leaves: Sequence[bytes], indices: Sequence[int]) -> list[list[bytes]]:
    """For each index, its ``depth`` sibling digests from the leaf up."""
    levels = _levels(leaves)
    out = []
    for index in indices:
        path, i = [], index
        for level in levels[:-1]:
            path.append(level[i ^ 1])
            i >>= 1
        out.append(path)
    return out


def verify(leaf: bytes, index: int, path: Sequence[bytes], n: int, expected_root: bytes) -> bool:
    """Whether ``leaf`` (a leaf digest) is leaf ``index`` of ``n`` under ``expected_root``."""
    if not 0 <= index < n or len(path) != depth_for(n):
        return False
    node, i = leaf, index
    for sibling in path:
        node = _node(node, sibling) if i % 2 == 0 else _node(sibling, node)
        i >>= 1
    return node == expected_root
