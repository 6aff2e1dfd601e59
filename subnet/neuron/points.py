"""The sweep lead's models: one model line per sweep point, then the final merge of them all.

A slot whose steps name sweep ``points`` holds one model per point beside its own: each with its
outer optimizer and its versions on the point's sub-stream of the model lane (``model.p1``,
``subnet.neuron.actions.sweep.point_stream``). ``fan_out`` publishes the common baseline (the
holder's version 0) as version 0 of every point; a ``merge`` step with ``per_point = true``
merges each point's workers into that point's model with the holder's own merge (``as_line``
points the holder at the point's line meanwhile); ``final_merge`` averages the points' models
into the holder's own model and publishes it on the lane itself. A point's versions go out as
lossless patches: the sparse broadcast keeps error feedback for the holder's own model only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..model import build_model
from ..topology import SlotPlan
from ..training import build_outer_optimizer, load_parameters, snapshot
from ..versions import VersionPublisher
from .actions.grants import trainers
from .actions.sweep import assign_points, point_stream
from .context import PointHolder
from .merge_result import MergeResult
from .model_line import ModelLine, line_record, line_state
from .rules import OUTER_RULES


def sweep_points(slot: SlotPlan) -> list[float]:
    """The points the slot's steps name (the first step that names any), else none."""
    for step in slot.steps:
        if step.params.get("points"):
            return [float(p) for p in step.params["points"]]
    return []


class Points:
    """The holder's per-point model lines (empty for a holder of one model)."""

    def __init__(self, holder: PointHolder) -> None:
        self.holder = holder
        self.lines: dict[int, ModelLine] = {}  # point index -> its line
        self.values = sweep_points(holder.slot)

    def build(self) -> None:
        """One line per point, each starting as the holder's model (called by setup)."""
        h, p = self.holder, self.holder.rt.cfg.protocol
        for i in range(len(self.values)):
            model = build_model(p.model, vocab_size=h.data.vocab_size, seed=p.seed)
            load_parameters(model, snapshot(h.own.model))
            outer = build_outer_optimizer(OUTER_RULES[h.rt.plan.outer["name"]](p, h.rt.plan.outer))
            stream = point_stream(h.own.model_lane or "model", i)
            publisher = VersionPublisher(
                h.rt.store,
                h.rt.signer,
                p.run,
                checkpoint_every=p.checkpoint_every,
                max_bytes=h.own.publisher.max_bytes,
                lane=stream,
            )
            self.lines[i] = ModelLine(model, outer, publisher, stream)

    def streams(self) -> dict[int, str]:
        """Point index -> the stream its versions are on."""
        return {i: line.model_lane for i, line in self.lines.items()}

    def start(self, values: list[float]) -> None:
        """Publish the common baseline as version 0 of every point (once; resumable)."""
        if [float(v) for v in values] != self.values:
            raise ValueError(f"fan_out points {values} differ from the slot's {self.values}")
        baseline = snapshot(self.holder.own.model)
        for line in self.lines.values():
            if self._resume(line) is None:
                load_parameters(line.model, baseline)
                with self.as_line(line):
                    line.unpublished = -1  # the baseline, "merged" before round 0
                    self.holder.publish_pending(None)

    def resume(self) -> None:
        """After a restart: each point continues from what its bucket says was published
        last when local state is missing or older (as the holder's own model does)."""
        for line in self.lines.values():
            self._resume(line)

    def _resume(self, line: ModelLine) -> Any:
        own = None if line.version is None or line.unpublished is not None else line.version
        published = line.publisher.resume(None if own is None else (own, snapshot(line.model)))
        if published is not None and (line.version is None or published.version > line.version):
            load_parameters(line.model, line.publisher.latest_state)
            line.version, line.unpublished = published.version, None
        return published

    def workers(self, index: int) -> list[str]:
        """The trainers of point ``index`` (worker i of the sorted cohort: point i mod n)."""
        assigned = assign_points(trainers(self.holder.rt), list(range(len(self.values))))
        return sorted(hk for hk, i in assigned.items() if int(i) == index)

    @contextmanager
    def as_line(self, line: ModelLine) -> Iterator[None]:
        """Let the holder merge and publish ``line`` meanwhile (its own line stays in place:
        a save in the middle files each model under its own names)."""
        h = self.holder
        h.line = line
        try:
            yield
        finally:
            h.line = h.own

    def merge(self, window: int) -> MergeResult:
        """Merge each point's workers into that point's model and publish it."""
        weights: dict[str, float] = {}
        merged = False
        for index, line in self.lines.items():
            with self.as_line(line):
                result = self.holder.step(window, senders=self.workers(index))
                self.holder.publish(window, result)
            merged |= result.merged
            weights |= result.weights
        return MergeResult(window, merged, weights)

    def final_models(self) -> dict[str, dict[str, torch.Tensor]]:
        """Each point's current model, by stream (what ``final_merge`` averages)."""
        return {line.model_lane: snapshot(line.model) for line in self.lines.values()}

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Per point: the model, the outer optimizer's state, the last and pending version."""
        meta, tensors = {}, {}
        for i, line in self.lines.items():
            meta[str(i)], own = line_record(line, f"p{i}:")
            tensors |= own
        return {"points": meta}, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        for i, line in self.lines.items():
            record = meta.get("points", {}).get(str(i), {})
            line.load_state_dict(line_state(record, tensors, f"p{i}:"))
