"""A validator's audits of training: which uploads to replay, when, and who is banned.

The rules and the replay are in ``audit.py`` (and ``subnet.scoring.audit``); this is the
validator's bookkeeping around them, window by window:

* **Before the scores** (``audit``): the senders it banned before are refused
  (``audit_banned``). An upload whose ``state_in`` is not the ``state_out`` this validator saw
  the same sender commit to for ``state_from`` fails at once (``audit_broken_chain``, no replay).
  The uploads the window's beacon draws are replayed, in the order of their draw, then those on
  **probation** (trained from a fresh state: a new sender, or one that started over), until the
  middle of the scoring phase. Nothing else here touches the network before the report.
* **In idle time** (``after_report``, until the window ends): the replays that did not fit,
  the state links this validator did not see committed (read from ``state_from``'s upload), and
  the **owed audits** of the window before: a sender the beacon drew that committed but did not
  reveal in time must still reveal, with its states, within a window (the beacon is out before
  the reveal, so withholding would dodge the audit); not revealing is a ban
  (``audit_unrevealed``). Each waits with a copy of its window's model; what finds no idle time
  within ``MAX_LAG`` windows is dropped, and logged (``audits_dropped``). A failure found here
  bans from the next window on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from loguru import logger

from ..compression import Compressor
from ..model import build_model
from ..scoring.audit import audit_draw
from .audit import (
    FRESH,
    AuditFailed,
    Replayer,
    beacon,
    claims,
    committed_out,
    is_audited,
)
from .rules import inner_config
from .uploads import Received, WindowUploads, collect_uploads

KEEP_OUTS = 16  # committed state_out digests kept per sender (its last uploads)
MAX_LAG = 2  # windows an audit may wait for idle time before it is dropped (and logged)


@dataclass
class Task:
    """An audit left for the validator's idle time (after its report, until its window ends)."""

    window: int
    hotkey: str
    kind: str  # "replay", "link" (only the state link) or "owed" (drawn, committed, unrevealed)
    due: int  # the first window after whose report it may run
    upload: Received | None = None
    commit: str = ""  # an owed audit: the digest the sender committed to
    version: int = -1  # the model version of ``window``
    base: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)


class Auditor:
    """One validator's audits on one lane (see the module doc)."""

    def __init__(self, rt: Any, lane: str, on_ban: Callable[[str], None],
                 assigned_of: Callable[[int], Callable[[str], list[int]]]) -> None:  # fmt: skip
        """``on_ban(hotkey)``: the validator drops its moving score and record;
        ``assigned_of(window)``: ``hotkey -> sample ids`` by the plan's data rule."""
        self.rt, self.lane, self.on_ban, self.assigned_of = rt, lane, on_ban, assigned_of
        self.banned: dict[str, int] = {}  # hotkey -> the window it was caught in
        self.outs: dict[str, dict[int, str]] = {}  # hotkey -> window -> committed state_out
        self.tasks: list[Task] = []  # memory only: a restart loses them (they are then moot)
        self._reason: dict[str, str] = {}  # why a ban was made (this process)
        self.replayer: Replayer | None = None

    @property
    def owed(self) -> dict[str, Task]:
        """The owed audits waiting, by hotkey."""
        return {t.hotkey: t for t in self.tasks if t.kind == "owed"}

    def setup(self, data: Any, replica: Any, compressor: Compressor) -> None:
        """The replayer (a scratch model on the validator's device), once the data is there."""
        p = self.rt.cfg.protocol
        model = build_model(p.model, vocab_size=data.vocab_size, seed=p.seed)
        self.data, self.replica, self.compressor = data, replica, compressor
        self.replayer = Replayer(model.to(self.rt.cfg.node.neuron.device), inner_config(self.rt),
                                 compressor, p.compression.ef_decay, p.scoring.audit_tolerance,
                                 p.scoring.audit_state_tolerance)  # fmt: skip

    @property
    def active(self) -> bool:
        """Audits need a commit-reveal lane (the state digests committed before the deadline)."""
        return (
            self.rt.lane(self.lane).commit_reveal
            and self.rt.cfg.protocol.scoring.audit_fraction > 0
        )

    # -- before the scores ----------------------------------------------------------------

    def audit(self, window: int, got: WindowUploads, commits: dict[str, str] | None) -> None:
        """Refuse the banned, audit what the window calls for (module doc); ``got`` is updated:
        a failed upload moves from ``accepted`` to ``rejected`` with its reason. Nothing here
        reads the network but the replays, and those only in the first half of the phase."""
        for hotkey in self.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = "audit_banned"
        if not self.active:
            return
        draw = beacon(self.rt, window)
        drawn, probation, links = [], [], []
        for hotkey, upload in got.accepted.items():
            try:
                digest_in, source, _ = claims(upload.meta, window)
            except AuditFailed as failed:
                self._fail(window, hotkey, failed, 0.0, None)
                continue
            known = self.outs.get(hotkey, {}).get(source) if source is not None else None
            if known is not None and known != digest_in:
                self._fail(window, hotkey, AuditFailed("audit_broken_chain", f"state_in is not "
                           f"the state its upload of window {source} committed to"), 0.0, None)  # fmt: skip
            elif is_audited(self.rt, self.lane, window, hotkey, draw):
                drawn.append(hotkey)
            elif draw is not None and digest_in == FRESH:
                probation.append(hotkey)
            elif known is None and source is not None:
                links.append(hotkey)  # not seen here: its link is read in idle time
        for hotkey in self.banned.keys() & got.accepted.keys():  # failed just now
            del got.accepted[hotkey]
            got.rejected[hotkey] = f"audit_{self._reason.get(hotkey, 'failed')}"
        run = self.rt.cfg.protocol.run
        order = sorted(drawn, key=lambda hk: audit_draw(draw or "", run, self.lane, window, hk))
        cfg = self.rt.cfg.protocol.window
        cutoff = self.rt.windows.start(window) + (cfg.reveal_by + cfg.report_deadline) // 2
        base: dict[str, torch.Tensor] = {}
        later = 0
        for hotkey in [*order, *probation, *links]:
            upload = got.accepted.get(hotkey)
            if upload is None:
                continue
            kind = "link" if hotkey in links else "replay"
            if kind == "replay" and self.rt.clock.now() < cutoff:
                self._replay(window, hotkey, upload, got)
                continue
            base = base or {k: v.clone() for k, v in self.replica.state.items()}
            self.tasks.append(Task(window, hotkey, kind, window, upload,
                                   version=int(self.replica.version), base=base))  # fmt: skip
            later += kind == "replay"
        if later:
            logger.warning("window {}: {} audit(s) did not fit before the report; they run "
                           "after it (a failure then bans from the next window on)", window, later)  # fmt: skip
        self._owe(window, got, commits, draw)
        for hotkey, upload in got.accepted.items():
            kept = self.outs.setdefault(hotkey, {})
            kept[window] = upload.meta.state_out or ""
            for old in sorted(kept)[:-KEEP_OUTS]:
                del kept[old]

    def _owe(self, window: int, got: WindowUploads, commits: dict[str, str] | None,
             draw: str | None) -> None:  # fmt: skip
        """Drawn senders that committed and did not reveal: their audit waits a window."""
        if commits is None or draw is None:
            return
        base: dict[str, torch.Tensor] = {}
        for hotkey in sorted(got.missing & commits.keys()):
            if hotkey not in self.banned and is_audited(self.rt, self.lane, window, hotkey, draw):
                base = base or {k: v.clone() for k, v in self.replica.state.items()}
                self.tasks.append(Task(window, hotkey, "owed", window + 1, commit=commits[hotkey],
                                       version=int(self.replica.version), base=base))  # fmt: skip
                logger.info("window {} {}: drawn for audit but not revealed; owed by the next "
                            "window", window, hotkey[:8])  # fmt: skip

    # -- in idle time ---------------------------------------------------------------------

    def after_report(self, window: int) -> None:
        """The waiting audits that are due, until ``window`` ends (the next upload phase is for
        polling commits); ones older than ``MAX_LAG`` windows are dropped, and logged."""
        stop = self.rt.windows.start(window + 1)
        stale = [t for t in self.tasks if t.window < window - MAX_LAG]
        if stale:
            logger.warning("{} audit(s) dropped: no idle time for them in {} windows",
                           len(stale), MAX_LAG)  # fmt: skip
            self.rt.metrics.log("audits_dropped", windows=sorted({t.window for t in stale}),
                                hotkeys=[t.hotkey for t in stale])  # fmt: skip
        self.tasks = [t for t in self.tasks if t.window >= window - MAX_LAG]
        for task in list(self.tasks):
            if task.due > window or task.hotkey in self.banned:
                if task.hotkey in self.banned:
                    self.tasks.remove(task)
                continue
            if self.rt.clock.now() >= stop:
                return
            self.tasks.remove(task)
            self._run(task)

    def _run(self, task: Task) -> None:
        """One waiting audit, against its window's model."""
        window, hotkey = task.window, task.hotkey
        if task.kind == "link":
            digest_in, source, _ = claims(task.upload.meta, window)
            try:
                if committed_out(self.rt, self.lane, source, hotkey) != digest_in:
                    raise AuditFailed("audit_broken_chain", f"state_in is not the state its "
                                      f"upload of window {source} committed to")  # fmt: skip
            except AuditFailed as failed:
                self._fail(window, hotkey, failed, 0.0, None, deferred=True)
            return
        upload = task.upload
        if task.kind == "owed":
            shapes = {k: tuple(v.shape) for k, v in task.base.items()}
            got = collect_uploads(self.rt, window, [hotkey], base_version=task.version,
                                  compressor=self.compressor, shapes=shapes,
                                  assigned=self.assigned_of(window), lane=self.lane,
                                  commits={hotkey: task.commit})  # fmt: skip
            upload = got.accepted.get(hotkey)
            if upload is None:
                why = got.rejected.get(hotkey, "stale" if hotkey in got.stale else "unrevealed")
                self._fail(window, hotkey, AuditFailed(f"audit_{why}", "drawn for audit, and "
                           "its committed upload is not readable a window later"), 0.0, None,
                           deferred=True)  # fmt: skip
                return
        self._replay(window, hotkey, upload, None, deferred=True, base=task.base)

    # -- one replay -----------------------------------------------------------------------

    def _replay(self, window: int, hotkey: str, upload: Received, got: WindowUploads | None,
                deferred: bool = False, base: dict[str, torch.Tensor] | None = None) -> None:  # fmt: skip
        """Audit one upload: passed, failed (rejected if ``got`` is given, and banned), or
        inconclusive (the validator's own failure: no verdict either way)."""
        assert self.replayer is not None, "setup first"
        ids = self.assigned_of(window)(hotkey)[: upload.samples or None]
        batches = self.data.batches(ids, self.replayer.inner.micro_batch)
        started = time.perf_counter()
        try:
            digest_in, source, _ = claims(upload.meta, window)
            # A link this validator saw committed needs no second read
            seen = source is not None and self.outs.get(hotkey, {}).get(source) == digest_in
            error = self.replayer.check(self.rt, self.lane, window, hotkey, upload,
                                        self.replica.state if base is None else base, batches,
                                        link_known=seen)  # fmt: skip
        except AuditFailed as failed:
            self._fail(window, hotkey, failed, time.perf_counter() - started, got, deferred)
            return
        except Exception as error:  # noqa: BLE001 - ours (data, memory), not the sender's
            logger.opt(exception=error).warning("window {} {}: audit inconclusive (this "
                                                "validator failed to replay)", window, hotkey[:8])  # fmt: skip
            self.rt.metrics.log("audit", window=window, hotkey=hotkey, ok=None,
                                reason="inconclusive", detail=str(error)[:200], deferred=deferred)  # fmt: skip
            return
        seconds = round(time.perf_counter() - started, 3)
        logger.info("window {} {}: audit passed (replay error {:.2g}, {:.1f}s)", window,
                    hotkey[:8], error, seconds)  # fmt: skip
        self.rt.metrics.log("audit", window=window, hotkey=hotkey, ok=True, error=error,
                            seconds=seconds, deferred=deferred)  # fmt: skip

    def _fail(self, window: int, hotkey: str, failed: AuditFailed, seconds: float,
              got: WindowUploads | None, deferred: bool = False) -> None:  # fmt: skip
        if got is not None and hotkey in got.accepted:
            del got.accepted[hotkey]
            got.rejected[hotkey] = failed.reason
        self.banned[hotkey] = window
        self._reason[hotkey] = failed.reason.removeprefix("audit_")
        self.on_ban(hotkey)
        logger.warning("window {} {}: audit failed, banned ({})", window, hotkey[:8], failed)
        self.rt.metrics.log("audit", window=window, hotkey=hotkey, ok=False, reason=failed.reason,
                            detail=failed.detail, seconds=round(seconds, 3), deferred=deferred)  # fmt: skip

    # -- state ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """For the validator's state file (the waiting audits are not kept: after a restart
        the validator no longer holds their windows' models)."""
        return {"banned": self.banned,
                "outs": {hk: {str(w): d for w, d in v.items()} for hk, v in self.outs.items()}}  # fmt: skip

    def restore(self, meta: dict[str, Any]) -> None:
        """Load what :meth:`state` saved."""
        self.banned = {k: int(v) for k, v in meta.get("banned", {}).items()}
        self.outs = {hk: {int(w): str(d) for w, d in v.items()}
                     for hk, v in meta.get("outs", {}).items()}  # fmt: skip
