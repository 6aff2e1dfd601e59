"""What a validator sends out after scoring a window: the signed score report on the step's
lane, and its moving scores offered to the runtime's weight sink (on a chain: weights every
tempo; the sink decides whether a submission is due)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..scoring import Verdict
from ..storage.keys import ObjectKind
from ..wire import ScoreReportMeta
from .runtime import Runtime


@dataclass
class ScoreReport:
    """One window's scoring (the ``score`` action's result): what was sent and why."""

    window: int
    version: int | None
    scores: dict[str, float]  # sender hotkey -> window score, as reported
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # scored hotkey -> payload sha256


def publish_report(
    rt: Runtime, result: ScoreReport, version: int | None, lane: str | None = None
) -> None:
    """Sign and write ``result`` on ``lane`` (the outbox's default lane when None), as of the
    model ``version`` it was scored against."""
    scores = dict(sorted(result.scores.items()))
    tensor = torch.tensor(list(scores.values()) or [0.0], dtype=torch.float32)
    report = ScoreReportMeta(scores=scores, digests=result.digests)
    rt.outbox(lane).publish(
        ObjectKind.SCORES,
        result.window,
        {"scores": tensor},
        metadata=report.wire(),
        base_version=version,
    )


class WeightOffers:
    """Offers the moving scores to the weight sink; remembers when weights were last set."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.last_weights_block = 0

    def offer(self, moving: Mapping[str, float], window: int) -> None:
        """Hand ``moving`` to the weight sink; log and remember a submission it made."""
        outcome = self.rt.weights.offer(
            moving, self.rt.roster, window=window, last_tick=self.last_weights_block
        )
        if outcome is None:
            return
        self.rt.metrics.log(
            "weights",
            block=outcome.tick,
            ok=outcome.ok,
            reason=outcome.reason,
            weights=outcome.weights,
        )
        if outcome.ok:
            self.last_weights_block = outcome.tick

    def state_dict(self) -> dict[str, Any]:
        """When weights were last set (a key of the validator's state file)."""
        return {"last_weights_block": self.last_weights_block}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved (missing: never)."""
        self.last_weights_block = int(state.get("last_weights_block", 0))
