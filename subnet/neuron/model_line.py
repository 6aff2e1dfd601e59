"""A model line: one model a holder advances, with what advancing it takes.

The model, its outer optimizer, the publisher of its versions (on its lane's key space, or a
sweep point's sub-stream), the last version published, a merge not yet published and, for the
holder's own model under the sparse broadcast, the broadcast's error feedback and the delta that
goes out with the next version. A holder holds one line of its own and one per sweep point
(``points.py``); its merge and publication work on whichever line it advances now
(``ModelHolder.line``), so a point's model is merged exactly as the holder's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..training import snapshot
from ..training.guard import PersistenceGuard
from ..versions import VersionPublisher
from ..versions.delta import Resparsifier, SparseDelta


@dataclass
class ModelLine:
    """One model a holder advances."""

    model: torch.nn.Module
    outer: Any  # the outer optimizer (``training.build_outer_optimizer``)
    publisher: VersionPublisher
    model_lane: str | None  # the key space of its versions (None: the plain model space)
    version: int | None = None  # the last version published
    unpublished: int | None = None  # a window merged into the model, not yet published
    broadcast: Resparsifier | None = None  # the sparse broadcast's error feedback (own line only)
    pending_delta: tuple[int, SparseDelta] | None = None  # (window, its sparse step)
    guard: PersistenceGuard | None = None  # the persistence guard's memory (own line only)

    def state_dict(self) -> dict[str, Any]:
        """What a restart needs of the line (the holder files it under its own names)."""
        delta = self.pending_delta
        return {
            "model": snapshot(self.model),
            "outer": self.outer.state_dict(),
            "version": self.version,
            "unpublished": self.unpublished,
            "broadcast": None if self.broadcast is None else self.broadcast.state_dict(),
            "delta": None if delta is None else (delta[0], dict(delta[1].payload)),
            "guard": None if self.guard is None else self.guard.state_dict(),
        }


class OnLine:
    """A holder attribute that lives on the line it advances now (its own, or a point's)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, holder: Any, owner: type | None = None) -> Any:
        return self if holder is None else getattr(holder.line, self.name)

    def __set__(self, holder: Any, value: Any) -> None:
        setattr(holder.line, self.name, value)
