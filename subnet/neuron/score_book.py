"""The validator's book of senders: moving scores, track records, evaluation counts, and who is
paid.

Each window's verdicts (``subnet.scoring.score_window``) move the book: a sender measured this
window adds its gain ratio to its **track record** (``scoring.record``), one scored and paid
counts one more **evaluated** window (its standing's first ones are a mean), and every
registered sender's **moving score** takes one EMA step (``update_moving``); an upload accepted
but not evaluated here this window (``scoring.evaluations``) is reported at its standing, and
its moving score stays.

**Pay rules** (``PayRules``): with checks of training on, a positive score counts only for a
verified sender, or, under ``scoring.pay_unverified``, one in a class some validator covers
(``class_book``); anyone else is held at 0 as ``unverified``, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..scoring import Evaluation, Verdict, extend_records, gain_ratios, score_window, update_moving
from .checks import Checker
from .runtime import Runtime
from .uploads import Received, WindowUploads

HELD = "a copy fingerprint matched it; the window's evaluations were spent"


class PayRules:
    """Whose positive score this validator pays (the module doc)."""

    def __init__(self, rt: Runtime, checker: Checker) -> None:
        self.rt = rt
        self.checker = checker

    def payable(self, accepted: Iterable[str]) -> list[str]:
        """The uploads this validator may pay: its verified senders' (everyone's without checks;
        with ``scoring.pay_unverified``, everyone's that some validator can check)."""
        if not self.checker.active:
            return list(accepted)
        return [hk for hk in accepted if self.paid(hk)]

    def paid(self, hotkey: str) -> bool:
        """Whether a sender's positive score counts here: verified, or unverified under
        ``scoring.pay_unverified`` in a class some validator covers (one no validator covers
        would be paid unchecked for good: ``class_book``)."""
        if hotkey in self.checker.trusted:
            return True
        pay = self.rt.cfg.protocol.scoring.pay_unverified
        return pay and self.checker.book.checkable(hotkey)

    def why_unpaid(self, hotkey: str) -> str:
        """Why a sender's score is held at 0: probation, or a class no validator covers."""
        if self.checker.book.checkable(hotkey):
            return "no check of it has passed yet"
        cls = self.checker.book.senders[hotkey][0]
        return f"no validator replays its class {cls}"

    def unpaid(self, verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
        """Without ``scoring.pay_unverified``: scores of 0 for senders no check has passed yet
        (their probation: they are checked first). Before this validator's first check passes
        nobody is verified, so it pays nobody: a network's first window is merged by no one
        (docs/reliability.md: attackers that scored above the honest miners there took 0.70 of
        its merge), and a window whose paid senders are all unverified pays none of them."""
        if not self.checker.active:
            return verdicts
        return {
            hk: replace(v, score=0.0, reason="unverified", detail=self.why_unpaid(hk))
            if v.score > 0 and not self.paid(hk)
            else v
            for hk, v in verdicts.items()
        }


class ScoreBook:
    """Moving scores, track records and evaluation counts per sender (the module doc)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.moving: dict[str, float] = {}
        # hotkey -> windows it was evaluated and payable in: its standing's first ones are a mean
        self.evaluated: dict[str, int] = {}
        # hotkey -> its last gain ratios on random samples (``scoring.record``): the track record
        self.records: dict[str, list[float]] = {}

    def drop(self, hotkey: str, *, count: bool = True) -> None:
        """A banned sender's moving score and track record go, and (``count``) its evaluation
        count."""
        self.moving.pop(hotkey, None)
        self.records.pop(hotkey, None)
        if count:
            self.evaluated.pop(hotkey, None)

    def fresh(self, hotkey: str) -> bool:
        """Whether ``hotkey`` was never evaluated and payable here (``scoring.sample``)."""
        return not self.evaluated.get(hotkey)

    def standing(self) -> set[str]:
        """The senders with a positive moving score."""
        return {hk for hk, score in self.moving.items() if score > 0}

    def judge(
        self,
        got: WindowUploads,
        in_time: Mapping[str, Received],
        evaluations: list[Evaluation],
        copies: dict[str, str],
        held: set[str],
        late: set[str],
        miners: list[str],
        pay: PayRules,
    ) -> tuple[dict[str, Verdict], set[str]]:
        """Every sender's verdict of the window, the book moved by them; and the senders kept at
        their moving score (accepted in time, not evaluated here). ``copies``: copier ->
        original; ``held``: matched uploads left over when the evaluations were spent."""
        p = self.rt.cfg.protocol.scoring
        ratios = gain_ratios(evaluations, p, copies)
        self.records = extend_records(self.records, ratios, p.record_windows, set(miners))
        verdicts = score_window(
            evaluations,
            got.missing - late,
            late,
            got.stale,
            got.rejected,
            copies,
            p,
            self.records,
            alone=len(in_time) == 1,
        )
        # Accepted and not evaluated here this window: reported at their standing, or held
        kept, payable = (in_time.keys() - verdicts.keys()) - held, set(pay.payable(in_time))
        verdicts |= {
            hk: Verdict(hk, self.moving.get(hk, 0.0), "standing")
            if hk in payable
            else Verdict(hk, 0.0, "unverified", pay.why_unpaid(hk))
            for hk in kept
        }
        verdicts |= {hk: Verdict(hk, 0.0, "held", HELD) for hk in held}
        verdicts = pay.unpaid(dict(sorted(verdicts.items())))
        self.settle(verdicts, kept | held, miners)
        return verdicts, kept | held

    def settle(self, verdicts: Mapping[str, Verdict], kept: set[str], miners: list[str]) -> None:
        """Count the paid senders' evaluations and take each registered miner's EMA step (one
        in ``kept`` keeps its moving score)."""
        scores = {hk: v.score for hk, v in verdicts.items()}
        paid = {hk for hk, v in verdicts.items() if v.reason == "scored"}
        self.evaluated = {hk: self.evaluated.get(hk, 0) + (hk in paid) for hk in miners}
        self.moving = update_moving(
            self.moving,
            {hk: s for hk, s in scores.items() if hk not in kept},
            set(miners),
            self.rt.cfg.protocol.scoring,
            kept,
            self.evaluated,
        )

    def mean_records(self) -> dict[str, float]:
        """Each sender's mean track record, rounded as reported (none for an empty one)."""
        return {hk: round(sum(v) / len(v), 4) for hk, v in self.records.items() if v}

    def state_dict(self) -> dict[str, Any]:
        """Moving scores, evaluation counts and track records (keys of the validator's state)."""
        return {"moving": self.moving, "evaluated": self.evaluated, "records": self.records}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved (missing keys: an empty book)."""
        self.moving = {k: float(v) for k, v in state.get("moving", {}).items()}
        self.evaluated = {k: int(v) for k, v in state.get("evaluated", {}).items()}
        self.records = {k: [float(x) for x in v] for k, v in state.get("records", {}).items()}
