"""What one validator's checks found: whom they verified and banned, and whose word counts here.

Every finished check ends here (``record``): a pass verifies the sender (in the class it is in
now), a failure bans it from the next window on and drops its score (``on_ban``), and either way
the verdict goes in this validator's next notice. The other validators' notices add their
passes as **vouches**: ``quorum`` of them verify a sender without a check of this validator's
own, so one validator that vouches falsely ends nobody's probation. A validator whose failure
claim this validator's replay contradicts is **distrusted**: its claims are ignored for
``DISTRUST`` windows. The log lines and ``check`` metrics of checks that end without a verdict
(a class not covered here, a replay this validator failed) are written here too, so that one
file says what every check leaves behind.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from loguru import logger

from ..verify.check import Outcome
from ..wire.schema import MAX_VERDICTS, CheckVerdict, verdict_windows
from .check_task import Task
from .class_book import ClassBook
from .runtime import Runtime

DISTRUST = 16  # windows a validator's failure claims are ignored after one proved false


class CheckLedger:
    """Verdicts, bans, vouches and distrust of one validator's checks (the module doc)."""

    def __init__(
        self, rt: Runtime, book: ClassBook, on_ban: Callable[[str], None], quorum: int
    ) -> None:
        """``book``: the replay classes (a pass counts only in the sender's current class);
        ``on_ban(hotkey)``: the validator drops the sender's moving score and record;
        ``quorum``: the other validators whose passes verify a sender here."""
        self.rt, self.book, self.on_ban, self.quorum = rt, book, on_ban, quorum
        self.banned: dict[str, int] = {}  # hotkey -> the window it was caught in
        self.verified: dict[str, int] = {}  # hotkey -> the last window a check of it passed
        # hotkey -> {another validator: the window its pass named}: ``quorum`` of them verify
        self.vouches: dict[str, dict[str, int]] = {}
        self.distrust: dict[str, int] = {}  # validator -> the window its claims count again
        # newcomer -> the last window any validator's notice named it (the newcomers' queue)
        self.named: dict[str, int] = {}
        self.results: list[CheckVerdict] = []  # finished since the last notice

    # -- whom this validator counts as verified -------------------------------------------

    @property
    def trusted(self) -> set[str]:
        """The senders this validator counts as verified: a check of its own passed them, or
        passes of ``quorum`` other validators did (one validator's word alone counts for
        nothing here, so a validator that vouches falsely needs an accomplice validator)."""
        vouched = {hk for hk, by in self.vouches.items() if len(by) >= self.quorum}
        return (self.verified.keys() | vouched) - self.banned.keys()

    def newcomers(self) -> dict[str, int]:
        """The newcomers' queue as the draw takes it: named senders not verified here."""
        trusted = self.trusted
        return {hk: w for hk, w in self.named.items() if hk not in trusted}

    def note_named(self, window: int, hotkeys: Iterable[str]) -> None:
        """Newcomers this validator named in ``window`` go behind the others in its queue; the
        verified and the banned leave it (the draw shuffles them by the beacon alone)."""
        for hotkey in hotkeys:
            self.named[hotkey] = max(self.named.get(hotkey, -1), window)
        done = self.trusted | self.banned.keys()
        self.named = {hk: w for hk, w in self.named.items() if hk not in done}

    def forget(self, hotkey: str) -> None:
        """A sender that changed class starts over here: its passes were of its old class."""
        self.verified.pop(hotkey, None)
        self.vouches.pop(hotkey, None)

    # -- the other validators' word -------------------------------------------------------

    def ignores(self, validator: str, window: int) -> bool:
        """Whether ``validator``'s claims are ignored in ``window`` (one proved false lately)."""
        return self.distrust.get(validator, -1) > window

    def vouch(self, validator: str, verdict: CheckVerdict) -> None:
        """Another validator's pass: one vouch (``trusted``), unless of a class the sender
        left since."""
        if verdict.window < self.book.since(verdict.hotkey):
            return  # a pass of the class this sender left
        by = self.vouches.setdefault(verdict.hotkey, {})
        by[validator] = max(by.get(validator, -1), verdict.window)

    def disproved(self, task: Task) -> None:
        """The replay here passes an upload ``task.claimant`` claimed failed: its claims are
        ignored for ``DISTRUST`` windows."""
        self.distrust[task.claimant] = task.window + DISTRUST
        logger.warning(
            "window {} {}: validator {} claimed a failed check; the replay here "
            "passes: its claims are ignored for {} windows",
            task.window,
            task.hotkey[:8],
            task.claimant[:8],
            DISTRUST,
        )

    # -- what a check leaves --------------------------------------------------------------

    def for_notice(self, window: int, grace: int) -> list[CheckVerdict]:
        """The verdicts the notice of ``window`` reports: the windows it may still name, at
        most ``MAX_VERDICTS`` of the latest."""
        low, _ = verdict_windows(window, grace)
        return [r for r in self.results if low <= r.window <= window][-MAX_VERDICTS:]

    def reported(self) -> None:
        """The verdicts went out in a notice: the next one reports those finished since."""
        self.results = []

    def record(
        self,
        window: int,
        hotkey: str,
        outcome: Outcome,
        seconds: float = 0.0,
        claimant: str = "",
        nbytes: int = 0,
        spread: float | None = None,
    ) -> None:
        """A finished check: verified, or banned here; reported in the next notice."""
        result = "pass" if outcome.ok else str(outcome.reason)
        self.results.append(CheckVerdict(window, hotkey, result, outcome.error))
        kind = "confirmation" if claimant else "check"
        error = outcome.error if math.isfinite(outcome.error) else None
        self.rt.metrics.log(
            "check",
            window=window,
            hotkey=hotkey,
            ok=outcome.ok,
            reason=outcome.reason,
            error=error,
            detail=outcome.detail,
            seconds=seconds,
            claimant=claimant or None,
            bytes=nbytes,
            spread=spread if spread is None or math.isfinite(spread) else None,
        )
        if outcome.ok and window >= self.book.since(hotkey):  # a pass in the class it is in
            self.verified[hotkey] = max(self.verified.get(hotkey, -1), window)
        if outcome.ok:
            logger.info(
                "window {} {}: {} passed (input error {:.2g}, honest spread {}, {:.1f}s)",
                window,
                hotkey[:8],
                kind,
                outcome.error,
                "-" if spread is None else f"{spread:.2g}",
                seconds,
            )
            return
        self.banned[hotkey] = window
        self.on_ban(hotkey)
        logger.warning(
            "window {} {}: {} failed, banned ({}: {})",
            window,
            hotkey[:8],
            kind,
            outcome.reason,
            outcome.detail,
        )

    def overdue(self, task: Task, grace: int) -> None:
        """A task past the grace: an owed answer or reveal is a failure (a liar would otherwise
        withhold it); a confirmation or a link this validator could not finish is dropped."""
        if task.claimant or task.link is not None:
            logger.warning(
                "window {} {}: a {} found no idle time or no answer in {} windows; dropped",
                task.window,
                task.hotkey[:8],
                "confirmation" if task.claimant else "link",
                grace,
            )
            return
        reason = "check_unrevealed" if task.upload is None else "check_unanswered"
        detail = f"named for a check, and nothing to check within {grace} windows"
        self.record(task.window, task.hotkey, Outcome(math.inf, reason, detail))

    def not_covered(self, window: int, hotkey: str, cls: str) -> None:
        """A named sender whose upload is of a class this validator cannot replay exactly (it
        changed class after its last upload here): no check, no verdict, no ban."""
        logger.info(
            "window {} {}: not checked: class {} is not one this validator replays",
            window,
            hotkey[:8],
            cls,
        )
        self.rt.metrics.log(
            "check", window=window, hotkey=hotkey, ok=None, reason="not_covered", detail=cls
        )

    def inconclusive(self, task: Task, error: Exception) -> None:
        """This validator failed to replay (its data, its memory): no verdict on the sender."""
        logger.opt(exception=error).warning(
            "window {} {}: check inconclusive (this validator failed to replay)",
            task.window,
            task.hotkey[:8],
        )
        self.rt.metrics.log(
            "check",
            window=task.window,
            hotkey=task.hotkey,
            ok=None,
            reason="inconclusive",
            detail=str(error)[:200],
        )

    # -- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """What survives a restart: bans, verifications, vouches, distrust, the queue of the
        named (verdicts not yet in a notice do not)."""
        return {
            "banned": self.banned,
            "verified": self.verified,
            "vouches": self.vouches,
            "distrust": self.distrust,
            "named": self.named,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved (other keys beside them are left alone)."""
        for name in ("banned", "verified", "distrust", "named"):
            setattr(self, name, {k: int(v) for k, v in state.get(name, {}).items()})
        self.vouches = {
            hk: {v: int(w) for v, w in by.items()} for hk, by in state.get("vouches", {}).items()
        }
