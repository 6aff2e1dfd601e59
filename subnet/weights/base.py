"""The ``WeightSink`` seam: where a scorer's moving scores end up.

Subnet mode injects :class:`~subnet.weights.chain.ChainWeights` (weights on chain every
tempo); a topology with a consensus slot gets :class:`SignedWeights` (a signed object on a lane
its consensus holder reads); everything else :class:`NoWeights`. The sink owns its cadence: a
role offers its scores once per window and the sink decides whether anything goes out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..membership.roster import Roster
from ..scoring import normalize
from ..storage.base import ObjectStore
from ..storage.keys import ObjectKind
from ..wire import Signer, publish_envelope


@dataclass(frozen=True)
class WeightsSet:
    """One submission: whether it went through, why not, when, and what was sent."""

    ok: bool
    reason: str  # "included", "rate_limited", "published", or the refusal's reason
    tick: int
    weights: dict[str, float] = field(default_factory=dict)  # target (uid or hotkey) -> weight


class WeightSink(Protocol):
    """Takes a scorer's moving scores (hotkey -> score) once per window."""

    def offer(
        self, moving: Mapping[str, float], roster: Roster, *, window: int, last_tick: int
    ) -> WeightsSet | None:
        """Submit if due (``last_tick``: tick of the last successful submission); None if not."""
        ...


class NoWeights:
    """Scores stay local (topologies whose scores only feed merges)."""

    def offer(
        self, moving: Mapping[str, float], roster: Roster, *, window: int, last_tick: int
    ) -> WeightsSet | None:
        """Never due."""
        return None


class SignedWeights:
    """Normalized scores as a signed object on ``lane`` for a consensus slot, every window."""

    def __init__(
        self,
        store: ObjectStore,
        signer: Signer,
        run: str,
        lane: str,
        kind: ObjectKind = ObjectKind.WEIGHTS,
    ) -> None:
        self.store, self.signer, self.run, self.lane, self.kind = store, signer, run, lane, kind

    def offer(
        self, moving: Mapping[str, float], roster: Roster, *, window: int, last_tick: int
    ) -> WeightsSet | None:
        """Publish this window's weights (members only); write-once, so a retry is a no-op."""
        weights = normalize({hk: s for hk, s in moving.items() if hk in roster})
        if not weights:
            return None
        ordered = dict(sorted(weights.items()))
        tensor = torch.tensor(list(ordered.values()), dtype=torch.float32)
        publish_envelope(
            self.store,
            signer=self.signer,
            run=self.run,
            kind=self.kind,
            window=window,
            tensors={"weights": tensor},
            lane=self.lane,
            metadata={"weights": json.dumps(ordered)},
        )
        return WeightsSet(True, "published", window, ordered)
