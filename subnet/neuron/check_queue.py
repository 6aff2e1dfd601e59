"""The checks a validator owes, waiting for its idle time, and what a confirmation may replay.

Three kinds of task wait here (``check_task.Task``): **links** (a ``state_in`` that names an
upload this validator did not see), **confirmations** (another validator's failure claim,
replayed on the upload this validator holds) and **checks** of the senders its notice named.
Idle time takes them in that order, oldest first. At most one confirmation waits at a time: false
claims cannot take the whole idle budget. The uploads and model of the last two windows are held
for confirmations. All of it is memory only: a restart loses it (the windows' models are gone).
"""

from __future__ import annotations

import torch

from ..wire.schema import CheckVerdict
from .check_task import Task
from .class_book import ClassBook
from .uploads import Received, WindowUploads

Held = tuple[dict[str, Received], dict[str, torch.Tensor]]  # a window's uploads and its model


class CheckQueue:
    """The tasks waiting for idle time, and the windows held for confirmations (module doc)."""

    def __init__(self, book: ClassBook) -> None:
        """``book``: which classes this validator replays exactly (it checks no other)."""
        self.book = book
        self.tasks: list[Task] = []
        self.held: dict[int, Held] = {}  # window -> its accepted uploads and model: the last two

    def add(self, task: Task) -> None:
        """One more task to run in idle time."""
        self.tasks.append(task)

    def drop(self, task: Task) -> None:
        """A task run, or one that will not be."""
        self.tasks.remove(task)

    def in_order(self) -> list[Task]:
        """The tasks as idle time takes them: links, confirmations, then checks; oldest first."""
        self.tasks.sort(key=lambda t: (t.link is None, not t.claimant, t.window))
        return list(self.tasks)

    def add_targets(
        self,
        window: int,
        named: list[str],
        got: WindowUploads,
        commits: dict[str, str] | None,
        base: dict[str, torch.Tensor],
    ) -> list[tuple[str, str]]:
        """A check of each sender this validator ``named`` in ``window``: of its upload, or of
        the one it committed to and may still reveal late. Those of a class not covered here
        are not checked: returned with their class, in order."""
        uncovered = []
        for hotkey in named:
            upload = got.accepted.get(hotkey)
            if upload is not None and not self.book.covered(self._class(upload)):
                uncovered.append((hotkey, self._class(upload)))
            elif upload is not None:
                self.add(Task(window, hotkey, upload, base))
            elif commits is not None and hotkey in commits and hotkey in got.missing:
                # Committed and not revealed after it was named: it may still reveal late
                self.add(Task(window, hotkey, None, base, commit=commits[hotkey]))
        return uncovered

    def hold(
        self, window: int, accepted: dict[str, Received], base: dict[str, torch.Tensor]
    ) -> None:
        """Keep ``window``'s accepted uploads and model for confirmations (the last two)."""
        self.held = {w: h for w, h in self.held.items() if w >= window - 1}
        self.held[window] = (dict(accepted), base)

    def confirm(self, validator: str, verdict: CheckVerdict) -> None:
        """Replay here the upload another validator's failure claim names: when this validator
        holds it, covers its class, has no task for it yet, and no other confirmation waits."""
        uploads, base = self.held.get(verdict.window, ({}, {}))
        if verdict.hotkey not in uploads:
            return  # an upload this validator does not hold (any longer)
        if not self.book.covered(self._class(uploads[verdict.hotkey])):
            return  # a class this validator cannot replay exactly: it cannot confirm
        if any(t.hotkey == verdict.hotkey and t.window == verdict.window for t in self.tasks):
            return
        if sum(1 for t in self.tasks if t.claimant) >= 1:
            return  # one confirmation a window: false claims cannot take the whole budget
        self.add(Task(verdict.window, verdict.hotkey, uploads[verdict.hotkey], base, validator))

    def _class(self, upload: Received) -> str:
        """The replay class ``upload`` was trained in (``ClassBook.of``)."""
        return self.book.of(upload.meta.replay_class)
