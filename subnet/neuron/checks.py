"""Checks, the validator's side: whom it checks, when, and what a failed check costs.

The rules are in ``subnet.verify`` (draws, answers, the comparison) and docs/protocol.md. Per
window, a validator running checks on a commit-reveal lane:

* **Names its targets** (``notice``, at the guard tick after the upload deadline, once the
  beacon is out): ``scoring.checks`` of the committed senders by ``subnet.verify.draw.targets``
  (senders not yet verified first), written as its signed notice with the verdicts of the checks
  it finished since its last one. Named miners answer within the window.
* **Screens the uploads** before scoring them (``screen``): a banned sender is refused
  (``check_banned``); an upload whose ``state_in`` does not continue the ``state_out`` its sender
  committed to in ``state_from`` fails at once (``check_broken_chain``, a ban); its targets' uploads
  are kept for the check, with the window's model.
* **Checks in its idle time** (``idle``, after its report until the middle of the next upload
  phase): first one failure another validator claims (a *confirmation*: the same upload,
  replayed here; a claim this validator's replay contradicts makes it ignore that validator's
  claims for a while), then its own targets. Each check reads the answer (bounded in bytes and
  time), replays the window and compares (``subnet.verify.check``). A failure bans the sender
  here from the next window on. An answer that cannot be read is **owed**: tried again in later
  idle time (a storage outage costs nothing), and so is the upload of a target that committed
  and did not reveal (it may reveal late); after ``scoring.check_grace`` windows without them
  the sender is banned (``check_unanswered``, ``check_unrevealed``): otherwise a liar would
  withhold whatever a check would read. A link this validator did not see committed is read
  from the upload it names, in the same idle time.

Only this validator's own evidence bans: another validator's failure claim tells it which
upload to replay. A sender is verified here by a check of its own, or by the passes of
``QUORUM`` (2) other validators: one validator's word alone counts for nothing, so a validator
that vouches falsely ends nobody's probation without an accomplice validator.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
from loguru import logger

from ..compression import Compressor
from ..data import TokenDataset
from ..model import build_model
from ..storage.base import StorageError
from ..storage.keys import ObjectKind
from ..verify.answer import BadAnswer, parse_answer
from ..verify.check import Outcome, check, chunks_for, levels, spread, tolerance
from ..verify.chunks import FRESH
from ..verify.classes import ReplayClass, covered
from ..verify.draw import chunk_sample, targets
from ..wire import Rejected
from ..wire.schema import MAX_VERDICTS, CheckNotice, CheckVerdict, verdict_windows
from . import check_reads as reads
from .answers import (
    Malformed,
    beacon,
    chunk_map,
    commitments,
    notice_lane,
    read_notice,
)
from .bindings import inner_config
from .check_task import Task
from .class_book import ClassBook
from .replay import PROBE_NOISE, Replayer, ReplayShort
from .replica import Replica
from .runtime import Runtime
from .uploads import Received, WindowUploads

KEEP_OUTS = 16  # committed state_out roots kept per sender (its last uploads)
DISTRUST = 16  # windows a validator's failure claims are ignored after one proved false
QUORUM = 2  # other validators whose passes verify a sender here without a check of its own
READ_SHARE, READ_MIN_S = 0.05, 5.0  # one read of a miner's bucket: 5 % of a window, >= 5 s


class Checker:
    """One validator's checks on one lane (see the module doc)."""

    def __init__(
        self,
        rt: Runtime,
        lane: str,
        on_ban: Callable[[str], None],
        assigned_of: Callable[[int], Callable[[str], list[int]]],
    ) -> None:
        """``on_ban(hotkey)``: the validator drops the sender's moving score and record;
        ``assigned_of(window)``: ``hotkey -> sample ids`` by the plan's data rule."""
        self.rt, self.lane, self.on_ban, self.assigned_of = rt, lane, on_ban, assigned_of
        self.banned: dict[str, int] = {}  # hotkey -> the window it was caught in
        self.verified: dict[str, int] = {}  # hotkey -> the last window a check of it passed
        # hotkey -> {another validator: the window its pass named}: QUORUM of them verify here
        self.vouches: dict[str, dict[str, int]] = {}
        self.outs: dict[str, dict[int, str]] = {}  # hotkey -> window -> committed state_out
        self.distrust: dict[str, int] = {}  # validator -> the window its claims count again
        self.tasks: list[Task] = []  # memory only: a restart loses them
        self.results: list[CheckVerdict] = []  # finished since the last notice
        self.targets: dict[int, list[str]] = {}  # window -> the senders this validator named
        # newcomer -> the last window any validator's notice named it (the newcomers' queue)
        self.named: dict[str, int] = {}
        # window -> (its accepted uploads, its model): the last two, for confirmations
        self.held: dict[int, tuple[dict[str, Received], dict[str, torch.Tensor]]] = {}
        self.book = ClassBook(
            quorum=QUORUM
        )  # replay classes: this validator's, its senders', the others'
        self.replayer: Replayer | None = None
        self.window_seconds, self._last_idle = 60.0, None  # measured between idle periods

    # -- setup and state ------------------------------------------------------------------

    def setup(self, data: TokenDataset, replica: Replica, compressor: Compressor) -> None:
        """The replayer (a scratch model on the validator's device), once the data is there."""
        p = self.rt.cfg.protocol
        model = build_model(p.model, vocab_size=data.vocab_size, seed=p.seed)
        self.data, self.replica, self.compressor = data, replica, compressor
        device = self.rt.cfg.node.neuron.device
        self.replayer = Replayer(model.to(device), inner_config(self.rt))
        self.book.covers = tuple(str(c) for c in covered(device, model, p.seq_len))
        logger.info("checks: this validator replays classes {}", ", ".join(self.book.covers))

    @property
    def trusted(self) -> set[str]:
        """The senders this validator counts as verified: a check of its own passed them, or
        passes of ``QUORUM`` other validators did (one validator's word alone counts for
        nothing here, so a validator that vouches falsely needs an accomplice validator)."""
        vouched = {hk for hk, by in self.vouches.items() if len(by) >= QUORUM}
        return (self.verified.keys() | vouched) - self.banned.keys()

    @property
    def active(self) -> bool:
        """Checks need a commit-reveal lane (commitments made before the deadline) and a chain
        beacon (rooms have none), and ``scoring.checks`` above 0."""
        return (
            self.rt.lane(self.lane).commit_reveal
            and self.rt.cfg.protocol.scoring.checks > 0
            and self.rt.beacon is not None
        )

    def state_dict(self) -> dict[str, Any]:
        """What survives a restart (waiting checks do not: their windows' models are gone)."""
        return {
            "banned": self.banned,
            "verified": self.verified,
            "vouches": self.vouches,
            "distrust": self.distrust,
            "named": self.named,
            "outs": {hk: {str(w): d for w, d in v.items()} for hk, v in self.outs.items()},
            "classes": self.book.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        for name in ("banned", "verified", "distrust", "named"):
            setattr(self, name, {k: int(v) for k, v in state.get(name, {}).items()})
        self.vouches = {
            hk: {v: int(w) for v, w in by.items()} for hk, by in state.get("vouches", {}).items()
        }
        self.outs = {
            hk: {int(w): str(d) for w, d in v.items()} for hk, v in state.get("outs", {}).items()
        }
        self.book.load_state_dict(state.get("classes", {}))

    # -- the notice -----------------------------------------------------------------------

    def notice(self, window: int, committed: list[str]) -> None:
        """Name this window's targets among the ``committed`` senders, once, after the beacon."""
        if not self.active or window in self.targets:
            return
        draw = beacon(self.rt, window)
        if draw is None:
            return  # no pulse stored yet, or the chain did not answer: tried again next tick
        p = self.rt.cfg.protocol
        me, validators = self.rt.hotkey, self.rt.writers(notice_lane(self.rt) or self.lane)
        # Only senders of a class this validator replays exactly, among the validators that
        # cover the same classes (``class_book``)
        candidates = sorted(hk for hk in set(committed) - self.banned.keys() if self.book.mine(hk))
        chosen = targets(
            draw,
            p.run,
            self.lane,
            window,
            candidates,
            self.trusted,
            self.book.peers(validators, me),
            me,
            p.scoring.checks,
            p.scoring.check_share,
            {hk: w for hk, w in self.named.items() if hk not in self.trusted},
            QUORUM,
        )
        self.targets = {w: t for w, t in self.targets.items() if w >= window - 2}
        low, _ = verdict_windows(window, p.scoring.check_grace)
        results = [r for r in self.results if low <= r.window <= window][-MAX_VERDICTS:]
        notice = CheckNotice(
            targets=tuple(chosen), verdicts=tuple(results), covers=self.book.covers
        )
        try:
            outbox = self.rt.outbox(notice_lane(self.rt))
            _, written = outbox.publish(ObjectKind.CHECKS, window, {}, metadata=notice.wire())
            if not written:  # a restart: the notice out there names whom miners answer for
                mine = read_notice(self.rt, window, me)
                chosen = list(mine.targets) if mine is not None else []
        except (StorageError, Rejected) as error:
            logger.warning(
                "window {}: writing the check notice failed ({}); its targets are not checked",
                window,
                error,
            )
            self.targets[window] = []
            return
        self.targets[window] = chosen
        self._note_named(window, chosen)
        self.results = []
        logger.info("window {}: checking {}", window, ", ".join(t[:8] for t in chosen) or "none")

    # -- before the scores ----------------------------------------------------------------

    def screen(self, window: int, got: WindowUploads, commits: dict[str, str] | None) -> None:
        """Refuse the banned, fail broken chains, keep the targets' uploads (module doc); ``got``
        is updated: a refused upload moves from ``accepted`` to ``rejected`` with its reason."""
        for hotkey in self.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = "check_banned"
        if not self.active:
            return
        self._classes(window, got)
        base = {k: v.clone() for k, v in self.replica.state.items()}
        for hotkey, upload in list(got.accepted.items()):
            try:
                digest_in, source, digest_out = commitments(upload.meta, window)
            except Malformed as error:
                del got.accepted[hotkey]
                got.rejected[hotkey] = "check_malformed"
                logger.info("window {} {}: refused ({})", window, hotkey[:8], error)
                continue
            known = self.outs.get(hotkey, {}).get(source) if source is not None else None
            if known is not None and known != digest_in:
                del got.accepted[hotkey]
                got.rejected[hotkey] = "check_broken_chain"
                why = f"state_in is not the state its upload of window {source} left"
                self._record(window, hotkey, Outcome(math.inf, "check_broken_chain", why))
                continue
            if known is None and source is not None:  # not seen here: read in idle time
                self.tasks.append(Task(window, hotkey, upload, {}, link=(source, digest_in)))
            kept = self.outs.setdefault(hotkey, {})
            kept[window] = digest_out
            for old in sorted(kept)[:-KEEP_OUTS]:
                del kept[old]
        for hotkey in self.targets.get(window, []):
            if hotkey in got.accepted and not self.book.covered(self._class(got.accepted[hotkey])):
                self._uncovered(window, hotkey, got.accepted[hotkey])
            elif hotkey in got.accepted:
                self.tasks.append(Task(window, hotkey, got.accepted[hotkey], base))
            elif commits is not None and hotkey in commits and hotkey in got.missing:
                # Committed and not revealed after it was named: it may still reveal late
                self.tasks.append(Task(window, hotkey, None, base, commit=commits[hotkey]))
        self.held = {w: h for w, h in self.held.items() if w >= window - 1}
        self.held[window] = (dict(got.accepted), base)

    def _class(self, upload: Received) -> str:
        """The replay class ``upload`` was trained in (``ClassBook.of``)."""
        return self.book.of(upload.meta.replay_class)

    def _classes(self, window: int, got: WindowUploads) -> None:
        """Refuse classes the protocol does not accept; a sender that changed class starts
        over here (``ClassBook.screen``)."""
        for hotkey in self.book.screen(window, got, self.rt.cfg.protocol.scoring.classes):
            self.verified.pop(hotkey, None)
            self.vouches.pop(hotkey, None)

    def _uncovered(self, window: int, hotkey: str, upload: Received) -> None:
        """A named sender whose upload is of a class this validator cannot replay exactly (it
        changed class after its last upload here): no check, no verdict, no ban."""
        cls = self._class(upload)
        logger.info(
            "window {} {}: not checked: class {} is not one this validator replays",
            window,
            hotkey[:8],
            cls,
        )
        self.rt.metrics.log(
            "check", window=window, hotkey=hotkey, ok=None, reason="not_covered", detail=cls
        )

    # -- in idle time ---------------------------------------------------------------------

    def idle(self, window: int) -> None:
        """After the report of ``window``: learn from the other notices, then run the waiting
        links and checks, confirmations first, until the middle of the next upload phase."""
        if not self.active:
            return
        now = time.monotonic()
        if self._last_idle is not None and self._last_idle[0] == window - 1:
            self.window_seconds = now - self._last_idle[1]
        self._last_idle = (window, now)
        self._read_notices(window)
        cfg = self.rt.cfg.protocol.window
        stop = self.rt.windows.start(window + 1) + cfg.upload_deadline // 2
        grace = self.rt.cfg.protocol.scoring.check_grace
        self.tasks.sort(key=lambda t: (t.link is None, not t.claimant, t.window))
        for task in list(self.tasks):
            if task.hotkey in self.banned:
                self.tasks.remove(task)
                continue
            if task.window < window - grace:
                self.tasks.remove(task)
                self._overdue(task)
                continue
            if self.rt.clock.now() >= stop:
                break
            self._run(task)

    def _read_notices(self, window: int) -> None:
        """The other validators' notices of ``window``: whose failure to confirm here (their
        passes verify nobody here: only this validator's own replay does)."""
        lane = notice_lane(self.rt)
        if lane is None:
            return
        for validator in self.rt.writers(lane):
            if validator == self.rt.hotkey:
                continue
            try:
                notice = read_notice(self.rt, window, validator)
            except Rejected as refused:  # nothing of it counts: one signed notice, one reading
                logger.info(
                    "window {}: the check notice of validator {} is refused ({})",
                    window,
                    validator[:8],
                    refused,
                )
                self.rt.metrics.log(
                    "notice_refused",
                    window=window,
                    validator=validator,
                    reason=str(refused.reason),
                    detail=refused.detail[:200],
                )
                continue
            if notice is None:
                continue
            self.book.learn(validator, notice.covers)
            for verdict in notice.verdicts:
                self._learn(validator, verdict, window)

    def _note_named(self, window: int, hotkeys) -> None:
        """Newcomers this validator named in ``window`` go behind the others in its queue; the
        verified and the banned leave it (the draw shuffles them by the beacon alone)."""
        for hotkey in hotkeys:
            self.named[hotkey] = max(self.named.get(hotkey, -1), window)
        done = self.trusted | self.banned.keys()
        self.named = {hk: w for hk, w in self.named.items() if hk not in done}

    def _learn(self, validator: str, verdict: CheckVerdict, window: int) -> None:
        """Another validator's verdict (none while that validator's claims are ignored): a pass
        is one vouch (``trusted``: ``QUORUM`` of them verify); a failure of an upload this
        validator still holds is replayed here (a confirmation)."""
        if self.distrust.get(validator, -1) > window:
            return
        if verdict.ok:
            if verdict.window < self.book.since(verdict.hotkey):
                return  # a pass of the class this sender left
            by = self.vouches.setdefault(verdict.hotkey, {})
            by[validator] = max(by.get(validator, -1), verdict.window)
            return
        if verdict.hotkey in self.banned:
            return
        uploads, base = self.held.get(verdict.window, ({}, {}))
        if verdict.hotkey not in uploads:
            return  # an upload this validator does not hold (any longer)
        if not self.book.covered(self._class(uploads[verdict.hotkey])):
            return  # a class this validator cannot replay exactly: it cannot confirm
        if any(t.hotkey == verdict.hotkey and t.window == verdict.window for t in self.tasks):
            return
        if sum(1 for t in self.tasks if t.claimant) >= 1:
            return  # one confirmation a window: false claims cannot take the whole budget
        task = Task(verdict.window, verdict.hotkey, uploads[verdict.hotkey], base, validator)
        self.tasks.append(task)

    def _run(self, task: Task) -> None:
        """One waiting task: a link, or a check (read the answer, replay, compare)."""
        assert self.replayer is not None, "setup first"
        started = time.perf_counter()
        try:
            if task.link is not None:
                outcome = self._link(task)
            else:
                outcome = self._check(task)
        except reads.Owed as owed:
            task.tries += 1
            logger.info(
                "window {} {}: {} (owed; tried again in idle time)",
                task.window,
                task.hotkey[:8],
                owed,
            )
            return
        except BadAnswer as bad:
            outcome = Outcome(math.inf, bad.reason, bad.detail)
        except Exception as error:  # noqa: BLE001 - ours (data, memory), not the sender's
            self.tasks.remove(task)
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
            return
        self.tasks.remove(task)
        if outcome is None:
            return  # a link that holds, or a late reveal of a class not covered here
        seconds = round(time.perf_counter() - started, 3)
        if task.claimant and outcome.ok:
            self.distrust[task.claimant] = task.window + DISTRUST
            logger.warning(
                "window {} {}: validator {} claimed a failed check; the replay here "
                "passes: its claims are ignored for {} windows",
                task.window,
                task.hotkey[:8],
                task.claimant[:8],
                DISTRUST,
            )
        self._record(
            task.window, task.hotkey, outcome, seconds, task.claimant, task.bytes, task.spread
        )

    def _link(self, task: Task) -> Outcome | None:
        """Whether the upload ``state_from`` names committed to the ``state_in`` claimed."""
        assert task.link is not None
        source, digest_in = task.link
        if reads.link_holds(self.rt, self.lane, task.hotkey, source, digest_in, self.read_seconds):
            return None
        why = f"state_in is not the state its upload of window {source} left"
        return Outcome(math.inf, "check_broken_chain", why)

    @property
    def read_seconds(self) -> float:
        """How long one read of a miner's bucket may hold a check: ``READ_SHARE`` of a window
        (as last measured between idle periods), at least ``READ_MIN_S``."""
        return max(READ_MIN_S, READ_SHARE * self.window_seconds)

    def _check(self, task: Task) -> Outcome | None:
        """Read the answer (and a late reveal), replay, compare; None: a late reveal of a class
        this validator does not cover (no verdict)."""
        assert self.replayer is not None
        p = self.rt.cfg.protocol
        shapes = {k: tuple(v.shape) for k, v in task.base.items()}
        if task.upload is None:
            task.upload = reads.late_reveal(
                self.rt,
                self.lane,
                task.window,
                task.hotkey,
                task.commit,
                self.compressor,
                shapes,
                self.assigned_of(task.window),
                self.read_seconds,
            )
        upload = task.upload
        if not self.book.covered(self._class(upload)):  # a late reveal in another class
            self.book.observe(task.hotkey, upload.meta.replay_class, task.window)
            self._uncovered(task.window, task.hotkey, upload)
            return None
        draw = beacon(self.rt, task.window)
        if draw is None:
            raise reads.Owed("the chain gives no beacon now")
        chunks = chunk_map(self.rt, shapes)
        ids = chunk_sample(
            draw, p.run, self.lane, task.window, task.hotkey, chunks, p.scoring.check_chunks
        )
        digest_in, _, digest_out = commitments(upload.meta, task.window)
        tensors = reads.answer(
            self.rt,
            self.lane,
            task.window,
            task.hotkey,
            chunks,
            ids,
            digest_in == FRESH,
            self.read_seconds,
        )
        task.bytes = sum(t.numel() * t.element_size() for t in tensors.values())
        answer = parse_answer(chunks, ids, tensors, digest_in, digest_out)
        samples = self.assigned_of(task.window)(task.hotkey)[: upload.samples or None]
        batches = list(self.data.batches(samples, self.replayer.inner.micro_batch))
        # As many threads and ranks as the miner's, at its precision: reductions split as its did
        threads, ranks = upload.meta.threads, upload.meta.ranks or 1
        bf16 = ReplayClass.parse(self._class(upload)).bf16
        try:
            delta = self.replayer.replay(
                task.base, batches, upload.steps, 0.0, threads, ranks, bf16
            )
        except ReplayShort as short:
            raise BadAnswer("check_steps", str(short)) from None
        outcome = self._compare(upload, chunks, ids, delta, answer, p.scoring.check_tolerance)
        if outcome.reason != "check_mismatch" or p.scoring.check_margin <= 0:
            return outcome
        # Beyond the fixed tolerance: is the window chaotic enough to explain it? A second
        # replay with perturbed gradients measures how far honest replays lie apart here.
        probe = self.replayer.replay(
            task.base, batches, upload.steps, PROBE_NOISE, threads, ranks, bf16
        )
        task.spread = spread(chunks, ids, delta, probe, answer.ef_in, p.compression.ef_decay)
        allowed = tolerance(p.scoring.check_tolerance, p.scoring.check_margin, task.spread)
        return self._compare(upload, chunks, ids, delta, answer, allowed)

    def _compare(self, upload: Received, chunks, ids, delta, answer, tolerance: float) -> Outcome:
        """The comparison on the drawn chunks (``subnet.verify.check``) at ``tolerance``."""
        p = self.rt.cfg.protocol
        decoded = upload.decode()
        parts = chunks_for(
            chunks, ids, delta, answer.ef_in, answer.ef_out, decoded, p.compression.topk
        )
        rules = self.compressor.info.check  # what the codec declares a check of it verifies
        return check(parts, p.compression.ef_decay, tolerance, rules, levels(decoded))

    # -- outcomes -------------------------------------------------------------------------

    def _record(
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

    def _overdue(self, task: Task) -> None:
        """A task past the grace: an owed answer or reveal is a failure (a liar would otherwise
        withhold it); a confirmation or a link this validator could not finish is dropped."""
        grace = self.rt.cfg.protocol.scoring.check_grace
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
        self._record(task.window, task.hotkey, Outcome(math.inf, reason, detail))
