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

import functools
import math
import time
from collections.abc import Callable
from typing import Any

from loguru import logger

from ..compression import Compressor
from ..data import TokenDataset
from ..verify.answer import BadAnswer
from ..verify.check import Outcome
from ..wire.schema import CheckVerdict
from . import check_reads as reads
from .check_ledger import CheckLedger
from .check_links import StateLinks
from .check_notices import CheckNotices
from .check_queue import CheckQueue
from .check_run import CheckRunner
from .check_task import Task
from .class_book import ClassBook
from .replica import Replica
from .runtime import Runtime
from .uploads import WindowUploads

QUORUM = 2  # other validators whose passes verify a sender here without a check of its own


class Checker:
    """One validator's checks on one lane (see the module doc), made of its parts: the replay
    classes (``ClassBook``), the verdicts (``CheckLedger``), the chain of each sender's uploads
    (``StateLinks``), the notices (``CheckNotices``), the tasks waiting for idle time
    (``CheckQueue``) and the replay that runs one (``CheckRunner``)."""

    def __init__(
        self,
        rt: Runtime,
        lane: str,
        on_ban: Callable[[str], None],
        assigned_of: Callable[[int], Callable[[str], list[int]]],
    ) -> None:
        """``on_ban(hotkey)``: the validator drops the sender's moving score and record;
        ``assigned_of(window)``: ``hotkey -> sample ids`` by the plan's data rule."""
        self.rt, self.lane = rt, lane
        # replay classes: this validator's, its senders', the others'
        self.book = ClassBook(quorum=QUORUM)
        self.ledger = CheckLedger(rt, self.book, on_ban, QUORUM)
        self.links = StateLinks(rt, lane)
        self.notices = CheckNotices(rt, lane, self.book, self.ledger)
        self.queue = CheckQueue(self.book)  # memory only: a restart loses the tasks
        self.runner = CheckRunner(rt, lane, self.book, self.ledger, assigned_of)

    # -- setup and state ------------------------------------------------------------------

    def setup(self, data: TokenDataset, replica: Replica, compressor: Compressor) -> None:
        """The replayer (a scratch model on the validator's device), once the data is there."""
        self.replica = replica
        self.runner.setup(data, compressor)

    @property
    def active(self) -> bool:
        """Checks need a commit-reveal lane (commitments made before the deadline) and a chain
        beacon (rooms have none), and ``scoring.checks`` above 0."""
        return (
            self.rt.lane(self.lane).commit_reveal
            and self.rt.cfg.protocol.scoring.checks > 0
            and self.rt.beacon is not None
        )

    @property
    def trusted(self) -> set[str]:
        """The senders this validator counts as verified (``CheckLedger.trusted``)."""
        return self.ledger.trusted

    @property
    def banned(self) -> dict[str, int]:
        """hotkey -> the window it was caught in (``CheckLedger``)."""
        return self.ledger.banned

    @property
    def verified(self) -> dict[str, int]:
        """hotkey -> the last window a check of this validator's passed it (``CheckLedger``)."""
        return self.ledger.verified

    @property
    def distrust(self) -> dict[str, int]:
        """validator -> the window its failure claims count again (``CheckLedger``)."""
        return self.ledger.distrust

    @property
    def targets(self) -> dict[int, list[str]]:
        """window -> the senders this validator's notice named (``CheckNotices``)."""
        return self.notices.targets

    def state_dict(self) -> dict[str, Any]:
        """What survives a restart (waiting checks do not: their windows' models are gone):
        the ledger's keys, the chain's roots as ``outs``, the classes as ``classes``."""
        return {
            **self.ledger.state_dict(),
            "outs": self.links.state_dict(),
            "classes": self.book.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.ledger.load_state_dict(state)
        self.links.load_state_dict(state.get("outs", {}))
        self.book.load_state_dict(state.get("classes", {}))

    # -- the notice -----------------------------------------------------------------------

    def notice(self, window: int, committed: list[str]) -> None:
        """Name this window's targets among the ``committed`` senders, once, after the beacon."""
        if self.active:
            self.notices.write(window, committed)

    # -- before the scores ----------------------------------------------------------------

    def screen(self, window: int, got: WindowUploads, commits: dict[str, str] | None) -> None:
        """Refuse the banned, fail broken chains, keep the targets' uploads (module doc); ``got``
        is updated: a refused upload moves from ``accepted`` to ``rejected`` with its reason."""
        for hotkey in self.ledger.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = "check_banned"
        if not self.active:
            return
        # Refuse classes the protocol does not accept; a sender that changed class starts
        # over here (``ClassBook.screen``)
        for hotkey in self.book.screen(window, got, self.rt.cfg.protocol.scoring.classes):
            self.ledger.forget(hotkey)
        base = {k: v.clone() for k, v in self.replica.state.items()}
        for task in self.links.screen(window, got, functools.partial(self.ledger.record, window)):
            self.queue.add(task)
        named = self.notices.targets.get(window, [])
        for hotkey, cls in self.queue.add_targets(window, named, got, commits, base):
            self.ledger.not_covered(window, hotkey, cls)
        self.queue.hold(window, got.accepted, base)

    # -- in idle time ---------------------------------------------------------------------

    def idle(self, window: int) -> None:
        """After the report of ``window``: learn from the other notices, then run the waiting
        links and checks, confirmations first, until the middle of the next upload phase."""
        if not self.active:
            return
        self.runner.idle_starts(window)
        for validator, verdict in self.notices.read(window):
            self._learn(validator, verdict, window)
        cfg = self.rt.cfg.protocol.window
        stop = self.rt.windows.start(window + 1) + cfg.upload_deadline // 2
        grace = self.rt.cfg.protocol.scoring.check_grace
        for task in self.queue.in_order():
            if task.hotkey in self.ledger.banned:
                self.queue.drop(task)
                continue
            if task.window < window - grace:
                self.queue.drop(task)
                self.ledger.overdue(task, grace)
                continue
            if self.rt.clock.now() >= stop:
                break
            self._run(task)

    def _learn(self, validator: str, verdict: CheckVerdict, window: int) -> None:
        """Another validator's verdict (none while that validator's claims are ignored): a pass
        is one vouch (``trusted``: ``QUORUM`` of them verify); a failure of an upload this
        validator still holds is replayed here (a confirmation)."""
        if self.ledger.ignores(validator, window):
            return
        if verdict.ok:
            self.ledger.vouch(validator, verdict)
        elif verdict.hotkey not in self.ledger.banned:
            self.queue.confirm(validator, verdict)

    def _run(self, task: Task) -> None:
        """One waiting task: a link, or a check (read the answer, replay, compare)."""
        assert self.runner.replayer is not None, "setup first"
        started = time.perf_counter()
        try:
            if task.link is not None:
                outcome = self.links.holds(task, self.runner.read_seconds)
            else:
                outcome = self.runner.check(task)
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
            self.queue.drop(task)
            self.ledger.inconclusive(task, error)
            return
        self.queue.drop(task)
        if outcome is None:
            return  # a link that holds, or a late reveal of a class not covered here
        seconds = round(time.perf_counter() - started, 3)
        if task.claimant and outcome.ok:
            self.ledger.disproved(task)
        self.ledger.record(
            task.window, task.hotkey, outcome, seconds, task.claimant, task.bytes, task.spread
        )
