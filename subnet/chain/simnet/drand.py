"""simnet's stand-in for the chain's drand pallet and block timestamps.

Subtensor stores drand's quicknet pulses (one every 3 s, each a BLS signature nobody can compute
before drand's threshold of nodes sign it) in ``Drand.Pulses``, with ``Drand.LastStoredRound`` and
``Drand.BeaconConfig`` (``genesis_time``, ``period``), and each block's time in ``Timestamp.Now``
(milliseconds). simnet has no drand network: a pulse's randomness is a hash of the chain's secret
entropy and the round, released once the round's time has come, so nobody outside the server
knows it sooner (the property the checks' draw relies on). Rounds are counted as drand counts
them: round ``r`` is out at ``genesis_time + (r - 1) x period``.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

PERIOD = 1  # seconds between simnet's pulses (quicknet: 3; simnet's blocks are faster than 12 s)


def round_at(now: float, genesis_time: int, period: int) -> int:
    """The last round out at time ``now`` (0 before the first)."""
    if now < genesis_time:
        return 0
    return int((now - genesis_time) // period) + 1


def randomness(entropy: str, number: int) -> str:
    """Round ``number``'s randomness, 32 bytes as hex (a function of the server's secret)."""
    return hashlib.sha256(f"drand:{entropy}:{number}".encode()).hexdigest()


class Beacon:
    """The pallet's reads over one chain's genesis time, period and secret entropy."""

    def __init__(self, entropy: str, genesis_time: int, period: int = PERIOD) -> None:
        self.entropy, self.genesis_time, self.period = entropy, genesis_time, period

    def last_round(self, now: float | None = None) -> int:
        """``Drand.LastStoredRound``: every round out by now is stored at once."""
        return round_at(time.time() if now is None else now, self.genesis_time, self.period)

    def read(self, name: str, params: list) -> Any:
        """``Drand.<name>`` as the SDK reads it; KeyError for an item simnet does not keep."""
        if name == "BeaconConfig":
            return {"genesis_time": self.genesis_time, "period": self.period}
        if name == "LastStoredRound":
            return self.last_round()
        if name == "Pulses":
            number = int(params[0])
            if not 0 < number <= self.last_round():
                return None
            value = randomness(self.entropy, number)
            return {"round": number, "randomness": "0x" + value, "signature": "0x"}
        raise KeyError(name)
