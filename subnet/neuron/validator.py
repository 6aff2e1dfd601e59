"""The validator: score every upload of a window, report the scores, offer weights.

Its one action, ``score`` (phase ``score``: from the upload deadline on), fetches the gradient
of each member writing the plan's gradient lane, verifies it, checks the sample receipt, and
measures the loss of its model before and after applying that update alone, sample by sample,
on a random subset of the sender's assigned samples and on random samples; only the proven
excess gain on its own samples is paid (``subnet.scoring``). Copies and replays (top-k index
overlap with an upload of this or a recent window, where the update fits the other's samples
better than its own), missing, late, stale and rejected uploads score 0. Scores feed a moving
average per hotkey; the window's scores go out as a signed report on the step's lane, and the moving
scores are offered to the runtime's weight sink (on a chain: weights every tempo).

The role is a composition; each part owns its state and says what of it is saved:

- ``arrivals.py``: when each upload first appeared (off commit-reveal), to tell late ones;
- ``intake.py``: collecting a window's uploads (by the commit snapshot on commit-reveal lanes);
- ``assessor.py``: fingerprints, the sample evaluated, and each upload's evaluation;
- ``score_book.py``: moving scores, track records, evaluation counts, and the pay rules;
- ``score_report.py``: the signed report and the weights offered;
- ``checks.py``, ``equivocation.py``: checks of training and bans of equivocating senders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from loguru import logger

from ..compression import build_compressor
from ..data import random_sample_ids
from ..scoring import Evaluation, Verdict
from ..scoring.assess import own_subset
from ..storage.keys import ObjectKind
from ..wire import Reason
from .arrivals import Arrivals
from .assessor import Assessor, Draws
from .base import BaseNeuron
from .bindings import lane_data_rule
from .checks import Checker
from .commits import CommitSnapshot
from .equivocation import KEEP_WINDOWS, Equivocations
from .gates import GATES
from .intake import Intake
from .replica import Replica
from .rules import DATA_RULES, STOP_RULES
from .runtime import Runtime
from .score_book import PayRules, ScoreBook
from .score_report import ScoreReport, WeightOffers, publish_report
from .state import prefixed, unprefixed
from .steps import Action, Step
from .uploads import Received, WindowUploads

__all__ = ["ScoreReport", "Validator"]


def _sample_ids(n: int, total: int) -> list[int]:
    """``n`` random sample ids of ``total`` (this module's ``random_sample_ids``, looked up at
    each draw: a test seeds it by patching this module)."""
    return random_sample_ids(n, total)


def _own_subset(ids: Sequence[int], n: int) -> list[int]:
    """``n`` of a sender's own sample ids (this module's ``own_subset``, looked up likewise)."""
    return own_subset(ids, n)


class Validator(BaseNeuron):
    """Scores uploads, publishes reports, keeps moving scores, offers weights."""

    role = "validator"

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        self.grads = rt.read_lane(self.slot, ObjectKind.GRADIENT.value).name  # the lane scored
        # On a commit-reveal lane the commits read before the reveal opened decide who is in
        # time and which payload each may reveal (``commits.py``); upload order decides nothing.
        self.commit_reveal = rt.lane(self.grads).commit_reveal
        self.snapshot = CommitSnapshot()
        self.arrivals = Arrivals(rt, self.grads)
        self.book = ScoreBook(rt)
        self.offers = WeightOffers(rt)
        # Senders the holder's seals prove signed two payloads for a window: banned
        self.equivocations = Equivocations(rt.cfg.protocol.run, self.grads)
        # Checks of training (``checks.py``): a sender whose upload the replay does not give is
        # banned: its moving score and record go
        self.checker = Checker(rt, self.grads, self.book.drop, self.assigned)
        self.pay = PayRules(rt, self.checker)
        draws = Draws(_sample_ids, _own_subset)
        self.assessor = Assessor(rt, self.grads, self.book, self.pay, self.assigned, draws)

    def setup(self) -> None:
        """The dataset (NotReady until the holder published it) and the model replica."""
        self.data = self.rt.dataset()
        self.replica = Replica(
            self.rt, self.data.vocab_size, self.rt.read_lane(self.slot, "model-manifest").name
        )
        self.compressor = build_compressor(self.rt.cfg.protocol.compression)
        self.checker.setup(self.data, self.replica, self.compressor)
        self.assessor.setup(self.data, self.replica, self.compressor)
        self.intake = Intake(self.rt, self.grads, self.snapshot, self.replica, self.compressor)

    def replica_of(self, step: Step) -> Replica:
        """The model a step starts from: the validator follows one."""
        return self.replica

    def committed(self, window: int) -> list[str]:
        """Hotkeys whose uploads of ``window`` its commit snapshot holds a commit for."""
        snapshot = self.snapshot.of(window)
        return sorted(snapshot.digests) if snapshot is not None else []

    def score(self, step: Step) -> ScoreReport:
        """The ``score`` action: sync, score the window, report on the step's lane, offer weights."""
        self.sync(step.window)
        report = self.step(step.window)
        self.publish(step.window, report, lane=step.lane)
        self.checker.idle(step.window)  # the report is out: idle time for the checks
        return report

    actions: ClassVar[dict[str, Action]] = {"score": score}
    gates = GATES  # the conditions a step of the plan may wait for
    stop_rules = STOP_RULES
    saved = ("arrivals", "book", "offers", "equivocations", "checker", "replica")
    # the commits of the window at hand and recent fingerprints (the assessor's) are memory only
    rebuilt = (
        "grads",
        "commit_reveal",
        "snapshot",
        "pay",
        "assessor",
        "intake",
        "data",
        "compressor",
    )

    def observe(self, tick: int, window: int, offset: int) -> None:
        """Read the commits up to the deadline (a commit-reveal lane); else note when each upload
        first appears, to tell which ones were in by the deadline."""
        if offset > self.rt.cfg.protocol.window.upload_deadline:
            if self.commit_reveal and getattr(self, "replica", None) is not None:
                self.checker.notice(window, self.committed(window))
        elif self.commit_reveal:
            self.snapshot.poll(self.rt, self.grads, window, offset, self.miners())
        else:
            self.arrivals.look(tick, window, offset, self.miners())

    def miners(self) -> list[str]:
        """Hotkeys that send on the scored lane (the roster's writers of it)."""
        return self.rt.writers(self.grads)

    def assigned(self, window: int) -> Callable[[str], list[int]]:
        """``hotkey -> sample ids`` by the plan's data rule (what receipts are checked against)."""
        return DATA_RULES[lane_data_rule(self.rt.plan, self.grads)](self.rt, self.data, window)

    def sync(self, window: int) -> None:
        """Move to the holder's latest model version, and ban the senders its manifest proves
        signed two payloads for a window (``equivocation.py``), in it or a version passed over."""
        before = self.replica.version
        self.replica.sync()
        for manifest in self.replica.manifests_since(before, KEEP_WINDOWS):
            for hotkey, equivocated in self.equivocations.convict(manifest):
                self.book.drop(hotkey, count=False)
                self.rt.metrics.log(
                    "equivocation", window=equivocated, hotkey=hotkey, version=manifest.version
                )

    def step(self, window: int) -> ScoreReport:
        """Fetch, verify and score every upload of ``window``; update the moving scores."""
        miners = self.miners()
        # Each payload is validated and measured (fingerprint, norm) in one parse, one sender
        # at a time: one whose reading fails is refused (``unreadable``) and the window goes on
        collected = self.intake.collect(
            window, miners, self.assigned(window), self.assessor.measure
        )
        if collected is None:
            return ScoreReport(window, self.replica.version, {})
        got, commits = collected.got, collected.commits
        self._refuse_equivocators(got)
        measured = self.assessor.measured(got)
        self.checker.screen(window, got, commits)
        after = self.arrivals.after_deadline(window, got.accepted)
        in_time = {hk: u for hk, u in got.accepted.items() if hk not in after}
        evaluations, copies, held = self.assessor.assess(window, in_time, measured)
        late = self.intake.late(window, got.missing - collected.unreadable, commits) | after
        verdicts, kept = self.book.judge(
            got, in_time, evaluations, copies, held, late, miners, self.pay
        )
        self._log_scores(window, verdicts, evaluations, kept, got, in_time)
        self.arrivals.forget(window)
        scores = {hk: v.score for hk, v in verdicts.items()}
        digests = {hk: got.accepted[hk].sha256 for hk in scores if hk in got.accepted}
        self.equivocations.record(window, digests)
        return ScoreReport(window, self.replica.version, scores, verdicts, digests)

    def _refuse_equivocators(self, got: WindowUploads) -> None:
        """Move the uploads of banned equivocators (still registered) to ``rejected``."""
        self.equivocations.forget(self.rt.roster.hotkeys())
        for hotkey in self.equivocations.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = Reason.EQUIVOCATED

    def _log_scores(
        self,
        window: int,
        verdicts: dict[str, Verdict],
        evaluations: list[Evaluation],
        kept: set[str],
        got: WindowUploads,
        in_time: dict[str, Received],
    ) -> None:
        """One log line per verdict, and the window's ``scores`` record."""
        for hk, v in sorted(verdicts.items()):
            logger.info(
                "window {} {}: {} score {:.4f} {}", window, hk[:8], v.reason, v.score, v.detail
            )
        self.rt.metrics.log(
            "scores",
            window=window,
            version=self.replica.version,
            verdicts={hk: [v.reason, v.score] for hk, v in verdicts.items()},
            moving=self.book.moving,
            details={hk: v.detail for hk, v in verdicts.items() if v.detail},
            measured={ev.hotkey: ev.measures() for ev in evaluations},
            record=self.book.mean_records(),
            kept=sorted(kept),  # not evaluated here: their moving scores stay
            alone=len(in_time) == 1,
            empty=not got.accepted,
            **self.rt.meter.take(),  # this window's fetches; its report counts in the next
        )

    def publish(self, window: int, result: ScoreReport, lane: str | None = None) -> None:
        """Sign and write the window's score report, then offer the moving scores as weights."""
        publish_report(self.rt, result, self.replica.version, lane)
        self.offers.offer(self.book.moving, window)

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Model at its version, moving scores, track records, when weights were last set."""
        meta = {
            "version": self.replica.version,
            **self.book.state_dict(),
            **self.offers.state_dict(),
            "equivocations": self.equivocations.state(),
            "checks": self.checker.state_dict(),
            # upload order, for a restart between the deadline and scoring
            **self.arrivals.state_dict(),
        }
        return meta, prefixed(self.replica.state or {}, "model")

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        self.book.load_state_dict(meta)
        self.offers.load_state_dict(meta)
        self.arrivals.load_state_dict(meta)
        self.equivocations.restore(meta.get("equivocations", {}))
        self.checker.load_state_dict(meta.get("checks", {}))
        self.replica.restore(meta.get("version"), unprefixed(tensors, "model"))
