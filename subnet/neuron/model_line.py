"""A model line: one model a holder advances, with what advancing it takes.

The model, its outer optimizer, the publisher of its versions (on its lane's key space, or a
sweep point's sub-stream), the last version published, a merge not yet published and, for the
holder's own model under the sparse broadcast, the broadcast's error feedback and the delta that
goes out with the next version. A holder holds one line of its own and one per sweep point
(``points.py``); its merge and publication work on whichever line it advances now
(``ModelHolder.line``), so a point's model is merged exactly as the holder's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..training import load_parameters, snapshot
from ..training.guard import PersistenceGuard
from ..versions import VersionPublisher
from ..versions.delta import Resparsifier, SparseDelta
from .state import prefixed, unprefixed


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
        """What a restart needs of the line (:func:`line_record` files it in the state file)."""
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

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` returned (a part it holds as None or empty is kept)."""
        self.version, self.unpublished = state.get("version"), state.get("unpublished")
        if state.get("model"):
            load_parameters(self.model, state["model"])
        self.outer.load_state_dict(state.get("outer") or {})
        if self.guard is not None and state.get("guard") is not None:
            self.guard.load_state_dict(state["guard"])
        if self.broadcast is not None:
            self.broadcast.load_state_dict(state.get("broadcast") or {})
            if state.get("delta") is not None:
                window, payload = state["delta"]
                self.pending_delta = (window, SparseDelta(self.broadcast.codec, payload))


def line_record(line: ModelLine, tag: str = "") -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The line's :meth:`~ModelLine.state_dict` under the state file's names: a JSON record
    (``version``, ``unpublished``; ``guard_seed``, ``delta_window`` where it holds them) and
    tensors (``model/``, ``outer/``; ``guard/``, ``broadcast/``, ``delta/``), each tensor name
    led by ``tag`` (a sweep point's ``p1:``)."""
    state = line.state_dict()
    meta = {"version": state["version"], "unpublished": state["unpublished"]}
    tensors = {**prefixed(state["model"], tag + "model"), **prefixed(state["outer"], tag + "outer")}
    if state["guard"] is not None:  # the persistence guard: its secret sketch and memory
        meta["guard_seed"] = state["guard"]["seed"]
        tensors |= prefixed(state["guard"]["memory"], tag + "guard")
    if state["broadcast"] is not None:  # its error feedback, and a delta not yet published
        tensors |= prefixed(state["broadcast"], tag + "broadcast")
        if state["delta"] is not None:
            meta["delta_window"] = state["delta"][0]
            tensors |= prefixed(state["delta"][1], tag + "delta")
    return meta, tensors


def line_state(
    meta: Mapping[str, Any], tensors: dict[str, torch.Tensor], tag: str = ""
) -> dict[str, Any]:
    """What :func:`line_record` filed, as :meth:`ModelLine.load_state_dict` takes it."""
    seed, window = meta.get("guard_seed"), meta.get("delta_window")
    guard = None if seed is None else {"seed": seed, "memory": unprefixed(tensors, tag + "guard")}
    return {
        "model": unprefixed(tensors, tag + "model"),
        "outer": unprefixed(tensors, tag + "outer"),
        "version": meta.get("version"),
        "unpublished": meta.get("unpublished"),
        "broadcast": unprefixed(tensors, tag + "broadcast"),
        "delta": None if window is None else (window, unprefixed(tensors, tag + "delta")),
        "guard": guard,
    }


class OnLine:
    """A holder attribute that lives on the line it advances now (its own, or a point's)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, holder: Any, owner: type | None = None) -> Any:
        return self if holder is None else getattr(holder.line, self.name)

    def __set__(self, holder: Any, value: Any) -> None:
        setattr(holder.line, self.name, value)
