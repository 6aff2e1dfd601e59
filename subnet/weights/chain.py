"""``ChainWeights``: moving scores become weights on chain once per tempo (``bt.SetWeights``).

``bt.SetWeights`` takes the commit-reveal path where the subnet enables it; the chain client
respects the rate limit and never raises on a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loguru import logger

from ..chain import ChainClient
from ..membership.roster import Roster
from ..scoring import weights_for_chain
from .base import WeightsSet


class ChainWeights:
    """Sets weights for one wallet on one subnet, at most once per tempo."""

    def __init__(self, chain: ChainClient, wallet: Any) -> None:
        self.chain, self.wallet = chain, wallet
        self._tempo: int | None = None  # read from the metagraph on first use

    def tempo(self) -> int:
        """Blocks per tempo (cached; re-read after each submission)."""
        if self._tempo is None:
            self._tempo = int(self.chain.metagraph().tempo)
        return self._tempo

    def offer(
        self, moving: Mapping[str, float], roster: Roster, *, window: int, last_tick: int
    ) -> WeightsSet | None:
        """Submit ``{uid: weight}`` when a tempo has passed since ``last_tick``."""
        block = self.chain.block()
        if block - last_tick < self.tempo():
            return None
        uids = {m.hotkey: m.uid for m in roster.members if m.uid is not None}
        weights = weights_for_chain(moving, uids)
        if not weights:
            logger.info("no miner has a positive score yet; not setting weights")
            return None
        outcome = self.chain.set_weights(self.wallet, weights)
        self._tempo = None
        return WeightsSet(
            outcome.ok, outcome.reason, outcome.block, {str(k): v for k, v in weights.items()}
        )
