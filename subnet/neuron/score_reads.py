"""The holder's reading of the scores: whose reports count, and what each signed report says.

The reports come from the plan's score lane (or, for a slot reading consensus weights, the
consensus slot's weights, its one trusted report); only writers of that lane holding
``runs.score`` are trusted (on a chain: the validator permits).
"""

from __future__ import annotations

from loguru import logger

from ..storage.base import StorageError
from ..storage.keys import ObjectKind
from ..wire import Rejected, ScoreReportMeta, WeightsMeta
from .runtime import Runtime

# Per trusted validator: its scores, and the payload digest each is for (None: consensus weights)
Signed = dict[str, tuple[dict[str, float], dict[str, str] | None]]


class ScoreReads:
    """Reads the score reports a holder merges by (no state: every window is read afresh)."""

    def __init__(self, rt: Runtime, lane: str | None) -> None:
        self.rt = rt
        self.lane = lane  # None in topologies without scorers

    def trusted(self) -> set[str]:
        """Scorers whose reports count: writers of the score lane holding ``runs.score``."""
        if self.lane is None:
            return set()
        roster = self.rt.roster
        if self.rt.lane(self.lane).kind == ObjectKind.WEIGHTS.value:
            return set(self.rt.writers(self.lane))  # the consensus slot's members
        return {hk for hk in self.rt.writers(self.lane) if roster.may(hk, "runs.score")}

    def reports(self, window: int, trusted: set[str]) -> dict[str, dict[str, float]]:
        """Window scores from each trusted validator's signed report (bad ones are skipped)."""
        return {hk: scores for hk, (scores, _) in self.signed(window, trusted).items()}

    def signed(self, window: int, trusted: set[str]) -> Signed:
        """Each trusted validator's signed report: its scores, and the payload digest each
        score is for (None for consensus weights, which name no payloads)."""
        out: Signed = {}
        inbox, limit = self.rt.inbox(self.lane), self.rt.max_bytes
        for hotkey in sorted(trusted):
            reader = self.rt.readers.get(hotkey)
            if reader is None:
                continue
            kind = ObjectKind(self.rt.lane(self.lane).kind)  # scores, or consensus weights
            try:  # the schema and the plan checked where the envelope is accepted
                envelope = inbox.fetch(reader, kind, window, hotkey, max_bytes=limit)
                if kind == ObjectKind.SCORES:
                    report = envelope.message(ScoreReportMeta)
                    out[hotkey] = (report.scores, report.digests)
                else:
                    weights = envelope.message(WeightsMeta)
                    out[hotkey] = (weights.scores or weights.weights or {}, None)
            except (StorageError, Rejected) as error:
                logger.info("no usable report from {} for window {}: {}", hotkey[:8], window, error)
            except Exception as error:  # noqa: BLE001 - that validator's voice, not the merge
                log = logger.opt(exception=error)
                log.warning("report of {} for window {} broke its reader", hotkey[:8], window)
        return out
