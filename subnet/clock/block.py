"""``BlockClock``: chain blocks as ticks (subnet mode), and the beacon the checks draw from.

It wraps anything with ``block()`` and ``follow_blocks(latest_only=...)`` (the chain client),
so this module needs no chain import and the neuron loop never sees the chain.

**The beacon** of a tick is the randomness of the first drand round out after the tick's block
was made (its ``Timestamp.Now``), read from the chain's ``Drand.Pulses``: drand's threshold
signature cannot be computed or ground by anyone, a miner or the block's author, before drand's
nodes sign it, and the round is fixed by the block's time before its value exists. A chain
that stores no pulses (a localnet without drand) falls back to the tick's block hash, which the
block's author could grind, and says so once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from loguru import logger

CACHED = 64  # beacons kept per clock (a made beacon never changes)


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

    def block_timestamp(self, block: int) -> float | None:
        """When a block was made, in seconds (None if unknown)."""
        ...

    def drand_schedule(self) -> tuple[int, int] | None:
        """The stored drand beacon's ``(genesis_time, period)``; None when none is stored."""
        ...

    def drand_randomness(self, number: int) -> str | None:
        """A drand round's randomness as hex; None until the chain stores its pulse."""
        ...


def drand_round_after(seconds: float, genesis_time: int, period: int) -> int:
    """The first drand round out strictly after ``seconds`` (round ``r`` is out at
    ``genesis_time + (r - 1) x period``)."""
    if seconds < genesis_time:
        return 1
    return int((seconds - genesis_time) // period) + 2


class BlockClock:
    """Ticks are block numbers; after a long step the consumer goes straight to the head."""

    def __init__(self, chain: BlockSource) -> None:
        self.chain = chain
        self._drand: tuple[int, int] | None = None
        self._warned = False
        self._beacons: dict[int, str] = {}

    def now(self) -> int:
        """The chain's current block."""
        return self.chain.block()

    def ticks(self) -> Iterator[int]:
        """Each new head block (blocks missed during a long step need no handling)."""
        return self.chain.follow_blocks(latest_only=True)

    def beacon(self, tick: int) -> str | None:
        """A value nobody knew before block ``tick`` was made: the first drand round out after
        it, as ``drand-ROUND-HEX`` (the block hash where the chain stores no pulses). None until
        it exists: before the block, or before the chain stores that round's pulse."""
        if tick in self._beacons:
            return self._beacons[tick]
        if tick > self.now():
            return None
        schedule = self._schedule()
        if schedule is None:
            value = self.chain.block_hash(tick) or None
        else:
            made = self.chain.block_timestamp(tick)
            number = None if made is None else drand_round_after(made, *schedule)
            pulse = None if number is None else self.chain.drand_randomness(number)
            value = None if pulse is None else f"drand-{number}-{pulse}"
        if value is not None:
            if len(self._beacons) >= CACHED:
                self._beacons.pop(min(self._beacons))
            self._beacons[tick] = value
        return value

    def _schedule(self) -> tuple[int, int] | None:
        """The chain's drand schedule, once it has one (asked again until then)."""
        if self._drand is None:
            self._drand = self.chain.drand_schedule()
            if self._drand is None and not self._warned:
                self._warned = True
                logger.warning(
                    "the chain stores no drand pulses: checks of training draw from block "
                    "hashes, which a block's author could grind"
                )
        return self._drand
