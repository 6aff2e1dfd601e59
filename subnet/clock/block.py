"""``BlockClock``: chain blocks as ticks (subnet mode).

It wraps anything with ``block()`` and ``follow_blocks(latest_only=...)`` (the chain client),
so this module needs no chain import and the neuron loop never sees the chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class BlockSource(Protocol):
    """What a block clock needs from a chain."""

    def block(self) -> int:
        """The current block number."""
        ...

    def follow_blocks(self, *, latest_only: bool = False) -> Iterator[int]:
        """Each new block as the chain produces it."""
        ...

    def block_hash(self, block: int) -> str | None:
        """The hash of a block the chain has made (None if the node does not have it)."""
        ...


class BlockClock:
    """Ticks are block numbers; after a long step the consumer goes straight to the head."""

    def __init__(self, chain: BlockSource) -> None:
        self.chain = chain

    def now(self) -> int:
        """The chain's current block."""
        return self.chain.block()

    def ticks(self) -> Iterator[int]:
        """Each new head block (blocks missed during a long step need no handling)."""
        return self.chain.follow_blocks(latest_only=True)

    def beacon(self, tick: int) -> str | None:
        """A value nobody knew before ``tick``: its block hash (None before the block exists)."""
        if tick > self.now():
            return None
        return self.chain.block_hash(tick) or None
