"""``MergeResult``: what one window's merge did (the result of ``merge`` and ``final_merge``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MergeResult:
    """One window's merge (the ``merge`` action's result)."""

    window: int
    merged: bool
    weights: dict[str, float] = field(default_factory=dict)  # merged senders -> merge weight
    bytes: int = 0  # bytes of the uploads read
    tokens: int = 0  # tokens the merged senders report (informational)
    reports: int = 0  # score reports used
    ddp_bytes: int = 0  # what DDP (ring all-reduce, fp32, every step) sends for the same work
    ddp_ring_bytes_per_worker: int = 0  # of which one worker sends (and receives as much)
    merge_seconds: float = 0.0

    def fields(self) -> dict[str, Any]:
        """The ``version`` metric's fields (the run page reads them)."""
        return {
            "weights": self.weights,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "reports": self.reports,
            "ddp_bytes": self.ddp_bytes,
            "ddp_ring_bytes_per_worker": self.ddp_ring_bytes_per_worker,
            "merge_seconds": self.merge_seconds,
        }
