"""The chain of a sender's uploads: each one's ``state_in`` continues the ``state_out`` it names.

Every upload commits to the error feedback it trained from (``state_in``, a Merkle root, and
``state_from``, the window of the upload that left it) and to the one it ended with
(``state_out``). A validator keeps the last ``KEEP_OUTS`` roots each sender committed to: an
upload whose ``state_in`` is not the root it names fails at once (``check_broken_chain``, a ban).
A link to an upload this validator did not see is a **link task**, read from that upload in idle
time (``holds``). Without links, a miner could prove any error feedback it liked
(docs/protocol.md, "Links").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from loguru import logger

from ..verify.check import Outcome
from . import check_reads as reads
from .answers import Malformed, commitments
from .check_task import Task
from .runtime import Runtime
from .uploads import WindowUploads

KEEP_OUTS = 16  # committed state_out roots kept per sender (its last uploads)


def broken(source: int) -> Outcome:
    """The failure of an upload whose ``state_in`` does not continue the one it names."""
    why = f"state_in is not the state its upload of window {source} left"
    return Outcome(math.inf, "check_broken_chain", why)


class StateLinks:
    """The ``state_out`` roots senders committed to, and the links that must continue them."""

    def __init__(self, rt: Runtime, lane: str) -> None:
        """``lane``: the gradient lane whose uploads are linked."""
        self.rt, self.lane = rt, lane
        self.outs: dict[str, dict[int, str]] = {}  # hotkey -> window -> committed state_out

    def screen(
        self, window: int, got: WindowUploads, fail: Callable[[str, Outcome], None]
    ) -> list[Task]:
        """Refuse malformed commitments (``check_malformed``) and broken chains (moved to
        ``rejected``; ``fail(hotkey, outcome)`` records the ban); note each accepted upload's
        ``state_out``. The links to read in idle time (uploads this validator did not see)."""
        links = []
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
                fail(hotkey, broken(source))
                continue
            if known is None and source is not None:  # not seen here: read in idle time
                links.append(Task(window, hotkey, upload, {}, link=(source, digest_in)))
            kept = self.outs.setdefault(hotkey, {})
            kept[window] = digest_out
            for old in sorted(kept)[:-KEEP_OUTS]:
                del kept[old]
        return links

    def holds(self, task: Task, seconds: float) -> Outcome | None:
        """A link task: None when the upload ``state_from`` names committed to the
        ``state_in`` claimed, else the failure (each read bounded by ``seconds``)."""
        assert task.link is not None
        source, digest_in = task.link
        if reads.link_holds(self.rt, self.lane, task.hotkey, source, digest_in, seconds):
            return None
        return broken(source)

    def state_dict(self) -> dict[str, Any]:
        """The roots kept, windows as strings (a JSON object's keys)."""
        return {hk: {str(w): d for w, d in v.items()} for hk, v in self.outs.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.outs = {hk: {int(w): str(d) for w, d in v.items()} for hk, v in state.items()}
