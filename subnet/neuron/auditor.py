"""A validator's audits of training: which uploads to replay, when, and who is banned.

The rules and the replay are in ``audit.py`` (and ``subnet.scoring.audit``); this is the
validator's bookkeeping around them, window by window:

* **Before the scores** (``audit``): the senders it banned before are refused
  (``audit_banned``). An upload whose ``state_in`` is not the ``state_out`` this validator saw
  the same sender commit to for ``state_from`` fails at once (``audit_broken_chain``, no replay).
  One it did not see committed is checked against ``state_from``'s own upload (a small read).
  The rest are audited when the window's beacon draws them, or on **probation**: trained from a
  fresh state (a new sender, or one that started over), which the miner answers unasked. Drawn ones go first, in the order of their draw. Replays run until
  the middle of the scoring phase; the rest run after the report (``after_report``), until the
  middle of the next upload phase, and their failures ban from then on.
* **Owed audits**: a sender the beacon drew that committed but did not reveal in time must
  still reveal, with its states, within a window (``settle``, before the next sync, while this
  validator still holds the window's model): a miner that knew it was drawn (the beacon is out
  before the reveal) cannot dodge the audit by withholding its upload. Not revealing is a ban
  (``audit_unrevealed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from loguru import logger

from ..compression import Compressor
from ..model import build_model
from ..scoring.audit import audit_draw
from .audit import (
    FRESH,
    STATE_OUT,
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


class Auditor:
    """One validator's audits on one lane (see the module doc)."""

    def __init__(self, rt: Any, lane: str, on_ban: Callable[[str], None],
                 assigned_of: Callable[[int], Callable[[str], list[int]]]) -> None:  # fmt: skip
        """``on_ban(hotkey)``: the validator drops its moving score and record;
        ``assigned_of(window)``: ``hotkey -> sample ids`` by the plan's data rule."""
        self.rt, self.lane, self.on_ban, self.assigned_of = rt, lane, on_ban, assigned_of
        self.banned: dict[str, int] = {}  # hotkey -> the window it was caught in
        self.outs: dict[str, dict[int, str]] = {}  # hotkey -> window -> committed state_out
        # hotkey -> (window, model version, commit digest): drawn, committed, not revealed
        self.owed: dict[str, tuple[int, int, str]] = {}
        self.deferred: tuple[int, dict[str, Received]] = (-1, {})
        self.replayer: Replayer | None = None

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
        a failed upload moves from ``accepted`` to ``rejected`` with its reason."""
        for hotkey in self.banned.keys() & got.accepted.keys():
            del got.accepted[hotkey]
            got.rejected[hotkey] = "audit_banned"
        self.deferred = (window, {})
        if not self.active:
            return
        draw = beacon(self.rt, window)
        drawn, probation = [], []
        for hotkey, upload in got.accepted.items():
            try:
                digest_in, source, _ = claims(upload.metadata, window)
            except AuditFailed:
                probation.insert(0, hotkey)  # fails at once, without a replay
                continue
            known = self.outs.get(hotkey, {}).get(source) if source is not None else None
            try:
                if known is None and source is not None:  # not seen here: read the link
                    known = committed_out(self.rt, self.lane, source, hotkey)
                if source is not None and known != digest_in:
                    raise AuditFailed("audit_broken_chain", f"state_in is not the state its "
                                      f"upload of window {source} committed to")  # fmt: skip
            except AuditFailed as failed:
                self._fail(window, hotkey, failed, 0.0, got)
                continue
            if is_audited(self.rt, self.lane, window, hotkey, draw):
                drawn.append(hotkey)
            elif draw is not None and digest_in == FRESH:
                probation.append(hotkey)
        run = self.rt.cfg.protocol.run
        order = sorted(drawn, key=lambda hk: audit_draw(draw or "", run, self.lane, window, hk))
        order += probation
        cfg = self.rt.cfg.protocol.window
        cutoff = self.rt.windows.start(window) + (cfg.reveal_by + cfg.report_deadline) // 2
        for hotkey in order:
            if hotkey not in got.accepted:
                continue
            if self.rt.clock.now() >= cutoff:
                self.deferred[1][hotkey] = got.accepted[hotkey]
                continue
            self._replay(window, hotkey, got.accepted[hotkey], got)
        if self.deferred[1]:
            logger.warning("window {}: {} audit(s) did not fit before the report; they run "
                           "after it (a failure then bans from the next window on)", window,
                           len(self.deferred[1]))  # fmt: skip
        self._owe(window, got, commits, draw)
        for hotkey, upload in got.accepted.items():
            out = upload.metadata.get(STATE_OUT, "")
            kept = self.outs.setdefault(hotkey, {})
            kept[window] = out
            for old in sorted(kept)[:-KEEP_OUTS]:
                del kept[old]

    def _owe(self, window: int, got: WindowUploads, commits: dict[str, str] | None,
             draw: str | None) -> None:  # fmt: skip
        """Drawn senders that committed and did not reveal: their audit waits a window."""
        if commits is None or draw is None:
            return
        for hotkey in sorted(got.missing & commits.keys()):
            if hotkey not in self.banned and is_audited(self.rt, self.lane, window, hotkey, draw):
                self.owed[hotkey] = (window, int(self.replica.version), commits[hotkey])
                logger.info("window {} {}: drawn for audit but not revealed; owed by the next "
                            "window", window, hotkey[:8])  # fmt: skip

    # -- after the report, and before the next sync ---------------------------------------

    def after_report(self) -> None:
        """The audits that did not fit before the report, until the middle of the next
        window's upload phase (the validator must be polling the commits by then)."""
        window, uploads = self.deferred
        self.deferred = (-1, {})
        stop = self.rt.windows.start(window + 1) + self.rt.cfg.protocol.window.upload_deadline // 2
        for hotkey, upload in uploads.items():
            if self.rt.clock.now() >= stop:
                dropped = list(uploads)[list(uploads).index(hotkey) :]
                logger.warning("window {}: {} audit(s) dropped: out of time", window, len(dropped))
                self.rt.metrics.log("audits_dropped", window=window, hotkeys=dropped)
                return
            self._replay(window, hotkey, upload, None, deferred=True)

    def settle(self) -> None:
        """The owed audits, against the model of their window (before the validator syncs)."""
        owed, self.owed = self.owed, {}
        for hotkey, (window, version, commit) in sorted(owed.items()):
            if self.replica.version != version or hotkey in self.banned:
                logger.info("window {} {}: owed audit dropped (model moved on)", window, hotkey[:8])
                continue
            shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
            got = collect_uploads(self.rt, window, [hotkey], base_version=version,
                                  compressor=self.compressor, shapes=shapes,
                                  assigned=self.assigned_of(window), lane=self.lane,
                                  commits={hotkey: commit})  # fmt: skip
            if hotkey in got.accepted:
                self._replay(window, hotkey, got.accepted[hotkey], None, deferred=True)
                continue
            why = got.rejected.get(hotkey, "stale" if hotkey in got.stale else "unrevealed")
            self._fail(window, hotkey, AuditFailed(f"audit_{why}", "drawn for audit, and "
                       "its committed upload is not readable a window later"), 0.0, None)  # fmt: skip

    # -- one replay -----------------------------------------------------------------------

    def _replay(self, window: int, hotkey: str, upload: Received, got: WindowUploads | None,
                deferred: bool = False) -> None:  # fmt: skip
        """Audit one upload: passed, failed (rejected if ``got`` is given, and banned), or
        inconclusive (the validator's own failure: no verdict either way)."""
        assert self.replayer is not None, "setup first"
        ids = self.assigned_of(window)(hotkey)[: upload.samples or None]
        batches = self.data.batches(ids, self.replayer.inner.micro_batch)
        started = time.perf_counter()
        try:
            error = self.replayer.check(self.rt, self.lane, window, hotkey, upload,
                                        self.replica.state, batches)  # fmt: skip
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
        self.on_ban(hotkey)
        logger.warning("window {} {}: audit failed, banned ({})", window, hotkey[:8], failed)
        self.rt.metrics.log("audit", window=window, hotkey=hotkey, ok=False, reason=failed.reason,
                            detail=failed.detail, seconds=round(seconds, 3), deferred=deferred)  # fmt: skip

    # -- state ----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """For the validator's state file."""
        return {"banned": self.banned, "owed": {hk: list(v) for hk, v in self.owed.items()},
                "outs": {hk: {str(w): d for w, d in v.items()} for hk, v in self.outs.items()}}  # fmt: skip

    def restore(self, meta: dict[str, Any]) -> None:
        """Load what :meth:`state` saved."""
        self.banned = {k: int(v) for k, v in meta.get("banned", {}).items()}
        self.owed = {k: (int(v[0]), int(v[1]), str(v[2])) for k, v in meta.get("owed", {}).items()}
        self.outs = {hk: {int(w): str(d) for w, d in v.items()}
                     for hk, v in meta.get("outs", {}).items()}  # fmt: skip
