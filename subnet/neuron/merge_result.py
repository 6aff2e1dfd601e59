"""``MergeResult``: what one window's merge did (the result of ``merge`` and ``final_merge``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..storage.counting import ddp_ring_bytes
from .uploads import Received


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

    @classmethod
    def of(
        cls,
        window: int,
        merged: Mapping[str, Received],
        weights: Mapping[str, float],
        n_params: int,
        steps: int,
        reports: int,
        seconds: float,
    ) -> MergeResult:
        """A merge of the ``merged`` uploads. Bytes and DDP bytes count the same uploads as the
        merge; DDP's is what each contributor would have sent all-reducing an fp32 gradient of
        the whole model in a ring, every step it trained (and received again)."""
        n = len(merged)
        return cls(
            window,
            True,
            {hk: weights[hk] for hk in merged},
            bytes=sum(u.nbytes for u in merged.values()),
            tokens=sum(u.tokens for u in merged.values()),
            reports=reports,
            ddp_bytes=sum(ddp_ring_bytes(n, n_params, u.steps or steps) for u in merged.values()),
            ddp_ring_bytes_per_worker=ddp_ring_bytes(n, n_params, steps),
            merge_seconds=round(seconds, 3),
        )

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
