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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import torch
from loguru import logger

from ..compression import build_compressor
from ..data import random_sample_ids
from ..scoring import (
    Evaluation,
    FingerprintLog,
    Verdict,
    extend_records,
    find_matches,
    gain_ratios,
    judge_matches,
    overlap_summary,
    score_window,
    twins,
    update_moving,
)
from ..scoring.assess import WindowProbe, assess_window, own_subset
from ..scoring.consensus import against, cosines
from ..scoring.draws import corpus_batches, heldout_draw, heldout_size
from ..scoring.sample import evaluated, with_matched
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..wire import Reason, ScoreReportMeta
from .answers import beacon, notice_lane
from .base import BaseNeuron
from .bindings import lane_data_rule
from .checks import Checker
from .commits import CommitSnapshot
from .equivocation import KEEP_WINDOWS, Equivocations
from .gates import GATES
from .replica import Replica
from .rules import DATA_RULES, STOP_RULES
from .state import prefixed, unprefixed
from .steps import Action, Step
from .uploads import Decoded, Received, WindowUploads, collect_uploads, modified_at, screen


@dataclass
class ScoreReport:
    """One window's scoring (the ``score`` action's result): what was sent and why."""

    window: int
    version: int | None
    scores: dict[str, float]  # sender hotkey -> window score, as reported
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # scored hotkey -> payload sha256


class Validator(BaseNeuron):
    """Scores uploads, publishes reports, keeps moving scores, offers weights."""

    role = "validator"

    def __init__(self, rt) -> None:
        super().__init__(rt)
        self.moving: dict[str, float] = {}
        # hotkey -> windows it was evaluated and payable in: its standing's first ones are a mean
        self.evaluated: dict[str, int] = {}
        # hotkey -> its last gain ratios on random samples (``scoring.record``): the track record
        self.records: dict[str, list[float]] = {}
        # (window, hotkey) -> (tick first seen, the store's last-modified time): upload order
        self.first_seen: dict[tuple[int, str], tuple[int, float]] = {}
        self.unreachable: set[tuple[int, str]] = set()
        # Windows whose deadline tick this validator itself looked at: an upload it did not see
        # then arrived after the deadline, however early the validator gets round to fetching it.
        self.deadline_looked: set[int] = set()
        self.last_weights_block = 0
        # Fingerprints of recent windows' uploads (memory only): a replay of one is caught.
        self.fingerprints = FingerprintLog(rt.cfg.protocol.scoring.history_windows)
        self.grads = rt.read_lane(self.slot, ObjectKind.GRADIENT.value).name  # the lane scored
        # On a commit-reveal lane the commits read before the reveal opened decide who is in
        # time and which payload each may reveal (``commits.py``); upload order decides nothing.
        self.commit_reveal = rt.lane(self.grads).commit_reveal
        self.snapshot = CommitSnapshot()
        # Senders the holder's seals prove signed two payloads for a window: banned
        self.equivocations = Equivocations(rt.cfg.protocol.run, self.grads)
        # Checks of training (``checks.py``): a sender whose upload the replay does not give is
        # banned: its moving score and record go
        self.checker = Checker(rt, self.grads, self._drop, self.assigned)

    def setup(self) -> None:
        """The dataset (NotReady until the holder published it) and the model replica."""
        self.data = self.rt.dataset()
        self.replica = Replica(
            self.rt, self.data.vocab_size, self.rt.read_lane(self.slot, "model-manifest").name
        )
        self.compressor = build_compressor(self.rt.cfg.protocol.compression)
        self.checker.setup(self.data, self.replica, self.compressor)

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

    def _drop(self, hotkey: str) -> None:
        """A banned sender's moving score, track record and evaluation count go."""
        self.moving.pop(hotkey, None)
        self.records.pop(hotkey, None)
        self.evaluated.pop(hotkey, None)

    def _payable(self, accepted) -> list[str]:
        """The uploads this validator may pay: its verified senders' (everyone's without checks;
        with ``scoring.pay_unverified``, everyone's that some validator can check)."""
        if not self.checker.active:
            return list(accepted)
        return [hk for hk in accepted if self._paid(hk)]

    def _paid(self, hotkey: str) -> bool:
        """Whether a sender's positive score counts here: verified, or unverified under
        ``scoring.pay_unverified`` in a class some validator covers (one no validator covers
        would be paid unchecked for good: ``class_book``)."""
        if hotkey in self.checker.trusted:
            return True
        pay = self.rt.cfg.protocol.scoring.pay_unverified
        return pay and self.checker.book.checkable(hotkey)

    def _counts(self, miners: list[str]) -> dict[str, int]:
        """Windows each registered miner was evaluated and payable in (``update_moving``)."""
        return {hk: self.evaluated.get(hk, 0) for hk in miners}

    actions: ClassVar[dict[str, Action]] = {"score": score}
    gates = GATES  # the conditions a step of the plan may wait for
    stop_rules = STOP_RULES
    saved = (
        "moving",
        "evaluated",
        "records",
        "first_seen",
        "unreachable",
        "deadline_looked",
        "last_weights_block",
        "equivocations",
        "checker",
        "replica",
    )
    # the commits of the window at hand and recent fingerprints are memory only
    rebuilt = ("fingerprints", "grads", "commit_reveal", "snapshot", "data", "compressor")

    def observe(self, tick: int, window: int, offset: int) -> None:
        """Read the commits up to the deadline (a commit-reveal lane); else note when each upload
        first appears, to tell which ones were in by the deadline."""
        if offset > self.rt.cfg.protocol.window.upload_deadline:
            if self.commit_reveal and getattr(self, "replica", None) is not None:
                snapshot = self.snapshot.of(window)
                self.checker.notice(window, sorted(snapshot.digests) if snapshot else [])
            return
        if self.commit_reveal:
            self.snapshot.poll(self.rt, self.grads, window, offset, self.miners())
            return
        inbox = self.rt.inbox(self.grads)
        for hotkey in self.miners():
            if (window, hotkey) in self.first_seen or (window, hotkey) in self.unreachable:
                continue
            reader = self.rt.readers.get(hotkey)
            key = inbox.key(ObjectKind.GRADIENT, window, hotkey)
            try:
                info = reader.head(key) if reader is not None else None
            except ObjectNotFound:
                continue  # not uploaded yet: look again next block
            except Exception as error:  # noqa: BLE001 - a broken or hostile bucket: its own loss
                # A bucket that fails (or stalls) once is not polled again this window, so one
                # slow endpoint cannot hold up the loop block after block.
                if not isinstance(error, StorageError):
                    logger.opt(exception=error).warning("bucket of {} broke", hotkey[:8])
                self.unreachable.add((window, hotkey))
                continue
            if info is not None:
                self.first_seen[(window, hotkey)] = (tick, info.last_modified.timestamp())
        if offset == self.rt.cfg.protocol.window.upload_deadline:
            self.deadline_looked.add(window)  # every upload there now was seen in time

    def miners(self) -> list[str]:
        """Hotkeys that send on the scored lane (the roster's writers of it)."""
        return self.rt.writers(self.grads)

    def assigned(self, window: int):
        """``hotkey -> sample ids`` by the plan's data rule (what receipts are checked against)."""
        return DATA_RULES[lane_data_rule(self.rt.plan, self.grads)](self.rt, self.data, window)

    def sync(self, window: int) -> None:
        """Move to the holder's latest model version, and ban the senders its manifest proves
        signed two payloads for a window (``equivocation.py``), in it or a version passed over."""
        before = self.replica.version
        self.replica.sync()
        for manifest in self.replica.manifests_since(before, KEEP_WINDOWS):
            for hotkey, equivocated in self.equivocations.convict(manifest):
                self.moving.pop(hotkey, None)
                self.records.pop(hotkey, None)
                self.rt.metrics.log(
                    "equivocation", window=equivocated, hotkey=hotkey, version=manifest.version
                )

    def step(self, window: int) -> ScoreReport:
        """Fetch, verify and score every upload of ``window``; update the moving scores."""
        p = self.rt.cfg.protocol
        miners = self.miners()
        collected = self._collect(window, miners)
        if collected is None:
            return ScoreReport(window, self.replica.version, {})
        got, commits, unreadable = collected
        self.equivocations.forget(self.rt.roster.hotkeys())
        for hotkey in self.equivocations.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = Reason.EQUIVOCATED
        # What scoring reads of each upload beyond its checked fields, read now, one sender at a
        # time: one whose reading fails is refused (``unreadable``) and the window goes on.
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        measured = screen(got, window, lambda u: self._measure(u, shapes))
        self.checker.screen(window, got, commits)
        after = self._after_deadline(window, got.accepted)
        in_time = {hk: u for hk, u in got.accepted.items() if hk not in after}
        evaluations, copies, held = self._assess(window, in_time, measured)
        late = self._late(window, got.missing - unreadable, commits) | after
        self.records = extend_records(
            self.records,
            gain_ratios(evaluations, p.scoring, copies),
            p.scoring.record_windows,
            set(miners),
        )
        verdicts = score_window(
            evaluations,
            got.missing - late,
            late,
            got.stale,
            got.rejected,
            copies,
            p.scoring,
            self.records,
            alone=len(in_time) == 1,
        )
        # Accepted and not evaluated here this window: reported at their standing, or held
        kept, payable = (in_time.keys() - verdicts.keys()) - held, set(self._payable(in_time))
        verdicts |= {
            hk: Verdict(hk, self.moving.get(hk, 0.0), "standing")
            if hk in payable
            else Verdict(hk, 0.0, "unverified", self._why_unpaid(hk))
            for hk in kept
        }
        why = "a copy fingerprint matched it; the window's evaluations were spent"
        verdicts |= {hk: Verdict(hk, 0.0, "held", why) for hk in held}
        verdicts = self._unpaid(dict(sorted(verdicts.items())))
        scores = {hk: v.score for hk, v in verdicts.items()}
        paid = {hk for hk, v in verdicts.items() if v.reason == "scored"}
        self.evaluated = {hk: n + (hk in paid) for hk, n in self._counts(miners).items()}
        self.moving = update_moving(
            self.moving,
            {hk: s for hk, s in scores.items() if hk not in kept | held},
            set(miners),
            p.scoring,
            kept | held,
            self.evaluated,
        )
        for hk, v in sorted(verdicts.items()):
            logger.info(
                "window {} {}: {} score {:.4f} {}", window, hk[:8], v.reason, v.score, v.detail
            )
        self.rt.metrics.log(
            "scores",
            window=window,
            version=self.replica.version,
            verdicts={hk: [v.reason, v.score] for hk, v in verdicts.items()},
            moving=self.moving,
            details={hk: v.detail for hk, v in verdicts.items() if v.detail},
            measured={ev.hotkey: ev.measures() for ev in evaluations},
            record={hk: round(sum(v) / len(v), 4) for hk, v in self.records.items() if v},
            kept=sorted(kept | held),  # not evaluated here: their moving scores stay
            alone=len(in_time) == 1,
            empty=not got.accepted,
            **self.rt.meter.take(),  # this window's fetches; its report counts in the next
        )
        self.first_seen = {k: b for k, b in self.first_seen.items() if k[0] > window}
        self.unreachable = {k for k in self.unreachable if k[0] > window}
        self.deadline_looked = {w for w in self.deadline_looked if w > window}
        digests = {hk: got.accepted[hk].sha256 for hk in scores if hk in got.accepted}
        self.equivocations.record(window, digests)
        return ScoreReport(window, self.replica.version, scores, verdicts, digests)

    def _collect(
        self, window: int, miners: list[str]
    ) -> tuple[WindowUploads, dict[str, str] | None, set[str]] | None:
        """The window's uploads, the commits they were checked against (None off commit-reveal),
        and the miners whose commit this validator failed to read; None when it cannot judge
        the window at all.

        On a commit-reveal lane only the payloads committed in this validator's snapshot are
        fetched; a miner without a commit in it is missing (or late), one with a malformed
        commit rejected. With no snapshot (not polling before the reveal opened: restarted, or
        far behind) it cannot tell a copy in time from an honest upload and scores nobody. One
        that missed the deadline tick still counts the commits it had not read as missing, as
        it would an upload it could not read: staying silent on them would let a miner keep
        its moving score without uploading, and one colluding validator set its merge weight.
        """
        commits, refused, unreadable = None, {}, set()
        if self.commit_reveal:
            snapshot = self.snapshot.of(window)
            failures = self.snapshot.failed(window)
            self.snapshot.forget(window)
            if snapshot is None:
                logger.warning(
                    "window {}: no commit snapshot from before the reveal (this "
                    "validator was not polling then); not scoring it",
                    window,
                )
                return None
            commits, refused = snapshot.digests, snapshot.refused
            unreadable = failures - set(commits)
            absent = set(miners) - set(commits)
            if not snapshot.complete and absent:
                logger.warning(
                    "window {}: this validator's last read of the commits ran past the "
                    "deadline; {} miner(s) whose commit it had not read count as "
                    "missing",
                    window,
                    len(absent),
                )
        uncommitted = set() if commits is None else set(miners) - set(commits)
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        got = collect_uploads(
            self.rt,
            window,
            [hk for hk in miners if hk not in uncommitted],
            base_version=self.replica.version,
            compressor=self.compressor,
            shapes=shapes,
            assigned=self.assigned(window),
            lane=self.grads,
            commits=commits,
        )
        refused = {hk: why for hk, why in refused.items() if hk in uncommitted}
        got.missing |= uncommitted - set(refused)
        got.rejected |= refused
        return got, commits, unreadable

    def _unpaid(self, verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
        """Without ``scoring.pay_unverified``: scores of 0 for senders no check has passed yet
        (their probation: they are checked first). Before this validator's first check passes
        nobody is verified, so it pays nobody: a network's first window is merged by no one
        (docs/reliability.md: attackers that scored above the honest miners there took 0.70 of
        its merge), and a window whose paid senders are all unverified pays none of them."""
        if not self.checker.active:
            return verdicts
        return {
            hk: replace(v, score=0.0, reason="unverified", detail=self._why_unpaid(hk))
            if v.score > 0 and not self._paid(hk)
            else v
            for hk, v in verdicts.items()
        }

    def _why_unpaid(self, hotkey: str) -> str:
        """Why a sender's score is held at 0: probation, or a class no validator covers."""
        if self.checker.book.checkable(hotkey):
            return "no check of it has passed yet"
        cls = self.checker.book.senders[hotkey][0]
        return f"no validator replays its class {cls}"

    def _after_deadline(self, window: int, accepted: dict[str, Received]) -> set[str]:
        """Accepted uploads that were not there when this validator looked at the deadline tick.

        Only when it did look at that tick (not after a restart or a skipped tick), and never
        for a bucket it could not poll: then there is no observation to go by.
        """
        if window not in self.deadline_looked:
            return set()
        return {
            hk
            for hk in accepted
            if (window, hk) not in self.first_seen and (window, hk) not in self.unreachable
        }

    def _measure(self, upload: Received, shapes: dict[str, tuple[int, ...]]) -> tuple[Any, float]:
        """An upload's copy fingerprint (of its support, bounded whatever the upload's size;
        None for a dense codec) and its norm."""
        support, norm = self.compressor.measure(upload.payload, shapes)
        support = self.fingerprints.of(support)
        if not math.isfinite(norm):
            raise ArithmeticError(f"an update of norm {norm}")
        return support, norm

    def _assess(
        self, window: int, accepted: dict[str, Received], measured: dict[str, tuple[Any, float]]
    ) -> tuple[list[Evaluation], dict[str, str], set[str]]:
        """Per-sample evaluation of this validator's sample of the uploads (``scoring.sample``)
        and of both sides of every fingerprint match, the copies the own-data evidence names,
        and the matched uploads left over (held); ``measured``: each upload's support and norm
        (``_measure``), for every upload."""
        p = self.rt.cfg.protocol
        assigned, n = self.assigned(window), p.eval_samples
        # A partial upload is evaluated on the prefix it trained (its receipt proves which).
        own = {hk: own_subset(assigned(hk)[: u.samples or None], n) for hk, u in accepted.items()}
        deltas = Decoded(accepted)  # decoded on use: one dense update alive at a time
        # Copy fingerprints need sparsity: a dense codec (support None) sends every index.
        supports = {hk: measured[hk][0] for hk in accepted}
        prints = {} if any(v is None for v in supports.values()) else supports
        history = self.fingerprints.recent(window)
        matches = find_matches(window, prints, history, p.scoring)

        def match_ids(m) -> list[int]:
            if m.window == window:
                return own[m.source]
            return own_subset(self.assigned(m.window)(m.source), n)

        probe = WindowProbe(
            self.replica.model,
            self.replica.state,
            lambda ids: corpus_batches(self.data, ids, p.inner.micro_batch),
        )
        random_ids = random_sample_ids(n, self.data.split_samples("train"))
        heldout = heldout_draw(p.scoring.heldout_samples, heldout_size(self.data))
        # Measured as merged: clipped to the median norm of the miners this validator pays
        # (fresh hotkeys cannot pull it down), norms from the payloads, not decodes.
        norms = {hk: measured[hk][1] for hk in accepted}
        standing = {hk for hk, score in self.moving.items() if score > 0}
        # Another miner's earlier upload is a replay outright (``judge_matches``): only the
        # pairs of this window and a miner's own earlier uploads need the evidence measured.
        judged = [m for m in matches if m.window == window or m.source == m.hotkey]
        validators = self.rt.writers(notice_lane(self.rt) or self.grads)
        payable = self._payable(accepted)
        suspects = against(cosines(deltas, norms)) if p.scoring.evaluations else []
        fresh = [hk for hk in accepted if not self.evaluated.get(hk)]
        draw = (beacon(self.rt, window), p.run, self.grads, window)
        sample = evaluated(
            *draw, payable, fresh, validators, self.rt.hotkey, p.scoring.evaluations, suspects
        )
        pairs = [(m.hotkey, m.source) if m.window == window else (m.hotkey,) for m in judged]
        sample, held = with_matched(sample, pairs, p.scoring.evaluations)
        judged = [m for m in judged if m.hotkey in sample]
        evaluations, fits = assess_window(
            probe,
            deltas,
            own,
            random_ids,
            judged,
            match_ids,
            heldout,
            norms,
            twins(matches, window),
            standing,
            sample,
        )
        evaluations = [replace(ev, fraction=accepted[ev.hotkey].fraction) for ev in evaluations]
        copies = judge_matches(matches, fits, p.scoring.copy_z, window)
        # A judged copy is kept out of the history: it would stand there under its copier's
        # hotkey, and a later upload of its original's sender that resembled the original would
        # then "match another miner's earlier upload".
        self.fingerprints.record(window, {hk: v for hk, v in prints.items() if hk not in copies})
        self.rt.metrics.log(
            "fingerprints",
            window=window,
            overlap=overlap_summary(prints, history),
            matches=[
                [m.hotkey, m.source, m.window, round(m.overlap, 4), *fits.get(m, ())]
                for m in matches
            ],
            evaluated=sorted(sample),
            held=sorted(held),
            against=suspects,
        )
        return evaluations, copies, held

    def _late(self, window: int, missing: set[str], commits: dict[str, str] | None) -> set[str]:
        """Uploads absent at the deadline that exist now: they arrived late. On a commit-reveal
        lane: a commit written after the snapshot, or a reveal after the validator looked."""
        inbox = self.rt.inbox(self.grads)

        def there(hk: str) -> bool:
            kind = (
                ObjectKind.GRADIENT
                if commits is None or hk in commits
                else ObjectKind.GRADIENT_COMMIT
            )
            reader = self.rt.readers.get(hk)
            key = inbox.key(kind, window, hk)
            return reader is not None and modified_at(reader, key) is not None

        return {hk for hk in missing if there(hk)}

    def publish(self, window: int, result: ScoreReport, lane: str | None = None) -> None:
        """Sign and write the window's score report, then offer the moving scores as weights."""
        scores = dict(sorted(result.scores.items()))
        tensor = torch.tensor(list(scores.values()) or [0.0], dtype=torch.float32)
        report = ScoreReportMeta(scores=scores, digests=result.digests)
        self.rt.outbox(lane).publish(
            ObjectKind.SCORES,
            window,
            {"scores": tensor},
            metadata=report.wire(),
            base_version=self.replica.version,
        )
        self.offer_weights(window)

    def offer_weights(self, window: int) -> None:
        """Hand the moving scores to the weight sink; it decides whether a submission is due."""
        outcome = self.rt.weights.offer(
            self.moving, self.rt.roster, window=window, last_tick=self.last_weights_block
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

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Model at its version, moving scores, track records, when weights were last set."""
        seen = [[w, hk, *at] for (w, hk), at in sorted(self.first_seen.items())]
        meta = {
            "version": self.replica.version,
            "moving": self.moving,
            "evaluated": self.evaluated,
            "records": self.records,
            "last_weights_block": self.last_weights_block,
            "equivocations": self.equivocations.state(),
            "checks": self.checker.state_dict(),
            "first_seen": seen,  # upload order, for a restart between the deadline and scoring
            "unreachable": sorted(self.unreachable),
            "deadline_looked": sorted(self.deadline_looked),
        }
        return meta, prefixed(self.replica.state or {}, "model")

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        self.moving = {k: float(v) for k, v in meta.get("moving", {}).items()}
        self.evaluated = {k: int(v) for k, v in meta.get("evaluated", {}).items()}
        self.records = {k: [float(x) for x in v] for k, v in meta.get("records", {}).items()}
        self.last_weights_block = int(meta.get("last_weights_block", 0))
        seen = meta.get("first_seen", [])
        self.first_seen = {(int(w), str(hk)): (int(t), float(at)) for w, hk, t, at in seen}
        self.unreachable = {(int(w), str(hk)) for w, hk in meta.get("unreachable", [])}
        self.deadline_looked = {int(w) for w in meta.get("deadline_looked", [])}
        self.equivocations.restore(meta.get("equivocations", {}))
        self.checker.load_state_dict(meta.get("checks", {}))
        self.replica.restore(meta.get("version"), unprefixed(tensors, "model"))
