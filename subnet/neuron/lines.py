"""Model lines: each model a trainer advances, with the state it keeps for that model alone.

Most plans give a trainer one model (the lane ``model``). ``@beam/two-models`` gives it two:
two ``train`` steps, each reading its own model lane (``model_a``, ``model_b``), writing its own
gradient lane, with its own data rule. ``@beam/sweep`` gives each worker the model of its sweep
point (``model.p1``: point 1's versions on lane ``model``) trained with that point's setting.
A line keeps what belongs to one model: the replica following its holder's versions, the inner
optimizer's state and the error feedback (an update to model A owes nothing to model B's).

Everything here is read from the step the plan lists: its lanes, its ``data_rule``, its
``params`` (``inner_steps``, ``keep_optimizer``, the sweep's ``sweep_key``/``points``). No branch
on a topology.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..compression import ErrorFeedback
from ..storage.keys import ObjectKind
from ..topology import StepPlan
from ..training import build_inner_optimizer
from ..training.config import InnerConfig
from .actions.sweep import point_of, point_stream
from .bindings import inner_config
from .replica import Replica
from .runtime import Runtime
from .state import load_optimizer_state, optimizer_state, prefixed, unprefixed


@dataclass
class Line:
    """One model a trainer follows and trains."""

    stream: str  # the key space of its versions: a model lane, or a sweep point's ``lane.pN``
    replica: Replica
    optimizer: torch.optim.Optimizer
    ef: ErrorFeedback
    inner: InnerConfig  # the protocol's inner settings with the plan's H and the point's setting
    data_rule: str  # the step's own data rule, else the plan's
    # keep the inner optimizer's moments across rounds (default False: a fresh, warm-started
    # AdamW each round, so the round depends on public inputs only and can be replayed)
    keep_optimizer: bool
    # The window of the last upload whose committed state_out is this line's state now (None:
    # the state is fresh, or was never committed): the next upload's ``state_from``
    state_window: int | None = None

    def fresh_optimizer(self) -> None:
        """Start the inner optimizer afresh (a new round without kept state, or divergence)."""
        self.optimizer = build_inner_optimizer(self.replica.model, self.inner)

    def start_over(self, ef_decay: float) -> None:
        """Drop the training state (moments and error feedback): the next upload starts fresh."""
        self.fresh_optimizer()
        self.ef = ErrorFeedback(ef_decay)
        self.state_window = None

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """The model at its version (a gossip worker's own mixed model), the error feedback and
        the inner optimizer: a record, and tensors under ``model/``, ``ef/`` and ``adamw/``."""
        groups, moments = optimizer_state(self.optimizer)
        tensors = {
            **prefixed(self.replica.state or {}, "model"),
            **prefixed(self.ef.state_dict(), "ef"),
            **prefixed(moments, "adamw"),
        }
        record = {
            "version": self.replica.version,
            "adamw_groups": groups,
            "state_window": self.state_window,
        }
        return record, tensors

    def load_state_dict(self, record: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state_dict` saved."""
        self.replica.restore(record.get("version"), unprefixed(tensors, "model"))
        self.ef.load_state_dict(unprefixed(tensors, "ef"))
        groups = record.get("adamw_groups", [])
        load_optimizer_state(self.optimizer, groups, unprefixed(tensors, "adamw"))
        window = record.get("state_window")
        self.state_window = None if window is None else int(window)


def lines_state(lines: dict[str, Line]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Every line's state: the first line's record at the top and its tensors unprefixed (a
    one-model state file), each other's under ``lines`` and its tensors behind ``<stream>:``."""
    meta: dict[str, Any] = {"lines": {}}
    tensors: dict[str, torch.Tensor] = {}
    for i, (stream, line) in enumerate(lines.items()):
        record, own = line.state_dict()
        head = "" if i == 0 else f"{stream}:"
        tensors |= {head + name: tensor for name, tensor in own.items()}
        if i == 0:
            meta |= record
        else:
            meta["lines"][stream] = record
    return meta, tensors


def load_lines(
    lines: dict[str, Line], meta: dict[str, Any], tensors: dict[str, torch.Tensor]
) -> None:
    """Load what :func:`lines_state` saved."""
    for i, (stream, line) in enumerate(lines.items()):
        head = "" if i == 0 else f"{stream}:"
        record = meta if i == 0 else meta.get("lines", {}).get(stream, {})
        own = {k[len(head) :]: v for k, v in tensors.items() if k.startswith(head)}
        line.load_state_dict(record, own)


def model_lane(rt: Runtime, step: StepPlan, slot) -> str:
    """The model lane a ``train`` step starts from: the one it reads, else its slot's."""
    for name in step.reads:
        if rt.plan.lanes[name].kind == ObjectKind.MODEL_MANIFEST.value:
            return name
    return rt.read_lane(slot, ObjectKind.MODEL_MANIFEST.value).name


def step_inner(rt: Runtime, step: StepPlan) -> InnerConfig:
    """The inner settings of a step: the plan's H, and the sweep point's value of its key.

    Validated like any config, so a point the optimizer cannot take (``inner.lr = 0``) is a
    ``ValueError`` naming it, not a silent default.
    """
    inner = inner_config(rt)
    point = point_of(rt, step.params)
    if point is None:
        return inner
    key = str(step.params.get("sweep_key", ""))
    field = key.removeprefix("inner.")
    if not key.startswith("inner.") or field not in InnerConfig.model_fields:
        raise ValueError(f"sweep_key {key!r} is not an inner-optimizer setting (inner.NAME)")
    return InnerConfig.model_validate({**inner.model_dump(), field: point[1]})


def build_line(rt: Runtime, slot, step: StepPlan, vocab_size: int) -> Line:
    """The line ``step`` trains: its replica (following the lane's writer), optimizer and EF."""
    p = rt.cfg.protocol
    lane = model_lane(rt, step, slot)
    point = point_of(rt, step.params)
    stream = lane if point is None else point_stream(lane, point[0])
    replica = Replica(rt, vocab_size, lane, stream=stream)
    inner = step_inner(rt, step)
    return Line(
        stream,
        replica,
        build_inner_optimizer(replica.model, inner),
        ErrorFeedback(p.compression.ef_decay),
        inner,
        step.data_rule or rt.plan.data_rule,
        bool(step.params.get("keep_optimizer", False)),
    )


def build_lines(rt: Runtime, slot, vocab_size: int) -> dict[str, Line]:
    """One line per model the slot's ``train`` steps advance, keyed by stream, in step order."""
    lines: dict[str, Line] = {}
    for step in slot.steps:
        if step.action != "train":
            continue
        line = build_line(rt, slot, step, vocab_size)
        lines.setdefault(line.stream, line)
    if not lines:
        raise ValueError(f"slot {slot.name} of {rt.plan.ref} has no train step")
    return lines


def stream_of(rt: Runtime, slot, step: StepPlan) -> str:
    """The stream of the line ``step`` trains (the key of :func:`build_lines`)."""
    lane = model_lane(rt, step, slot)
    point = point_of(rt, step.params)
    return lane if point is None else point_stream(lane, point[0])
