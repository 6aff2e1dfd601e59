"""The check notices: this validator's (whom it checks this window, how its checks came out) and
the other validators' (what they cover, what they found).

A notice is written once a window, at the guard tick after the upload deadline, once the beacon
is out: nobody knew the draw while commits could still be written. Its targets are drawn by
``subnet.verify.draw.targets`` among the committed senders of a class this validator covers,
shared with the validators that cover the same classes (``class_book``), the verified and the
newcomers' queue apart. A notice already out (a restart) stands: miners answer for whom it
names. The other validators' notices are read after the report: what they cover goes in the
class book, their verdicts to the checker (a pass is a vouch, a failure a confirmation to run).
"""

from __future__ import annotations

from collections.abc import Iterator

from loguru import logger

from ..storage.base import StorageError
from ..storage.keys import ObjectKind
from ..verify.draw import targets
from ..wire import Rejected
from ..wire.schema import CheckNotice, CheckVerdict
from .answers import beacon, notice_lane, read_notice
from .check_ledger import CheckLedger
from .class_book import ClassBook
from .runtime import Runtime


class CheckNotices:
    """Writes this validator's notices and reads the others' (the module doc); memory only:
    a restart reads its own notice back rather than drawing again."""

    def __init__(self, rt: Runtime, lane: str, book: ClassBook, ledger: CheckLedger) -> None:
        """``lane``: the gradient lane checked; ``ledger``: the verdicts, verified and queue
        the draw and the notice take."""
        self.rt, self.lane, self.book, self.ledger = rt, lane, book, ledger
        self.targets: dict[int, list[str]] = {}  # window -> the senders this validator named

    def write(self, window: int, committed: list[str]) -> None:
        """Name this window's targets among the ``committed`` senders, once, after the beacon."""
        if window in self.targets:
            return
        draw = beacon(self.rt, window)
        if draw is None:
            return  # no pulse stored yet, or the chain did not answer: tried again next tick
        chosen = self._draw(window, draw, committed)
        self.targets = {w: t for w, t in self.targets.items() if w >= window - 2}
        grace = self.rt.cfg.protocol.scoring.check_grace
        notice = CheckNotice(
            targets=tuple(chosen),
            verdicts=tuple(self.ledger.for_notice(window, grace)),
            covers=self.book.covers,
        )
        try:
            outbox = self.rt.outbox(notice_lane(self.rt))
            _, written = outbox.publish(ObjectKind.CHECKS, window, {}, metadata=notice.wire())
            if not written:  # a restart: the notice out there names whom miners answer for
                mine = read_notice(self.rt, window, self.rt.hotkey)
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
        self.ledger.note_named(window, chosen)
        self.ledger.reported()
        logger.info("window {}: checking {}", window, ", ".join(t[:8] for t in chosen) or "none")

    def _draw(self, window: int, draw: str, committed: list[str]) -> list[str]:
        """The senders the beacon ``draw`` names here: only those of a class this validator
        replays exactly, among the validators that cover the same classes (``class_book``)."""
        p = self.rt.cfg.protocol
        me, validators = self.rt.hotkey, self.rt.writers(notice_lane(self.rt) or self.lane)
        ledger = self.ledger
        candidates = sorted(
            hk for hk in set(committed) - ledger.banned.keys() if self.book.mine(hk)
        )
        return targets(
            draw,
            p.run,
            self.lane,
            window,
            candidates,
            ledger.trusted,
            self.book.peers(validators, me),
            me,
            p.scoring.checks,
            p.scoring.check_share,
            ledger.newcomers(),
            ledger.quorum,
        )

    def read(self, window: int) -> Iterator[tuple[str, CheckVerdict]]:
        """The other validators' notices of ``window``, one at a time: what each covers goes
        in the class book, then its verdicts come, each with the validator that gave it."""
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
                yield validator, verdict
