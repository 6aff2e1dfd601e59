"""The model holder: merge each window's uploads weighted by the validators' median scores.

Its one action, ``merge`` (phase ``merge``: from the report deadline on), reads the score
reports on the plan's score lane from the members it trusts (writers of that lane holding
``runs.score``: on a chain, the validator permits), weights each sender by the plan's
merge-weights rule (``median_score``: the median of their scores, samples trained when nobody
scored the window), fetches and verifies the uploads, aggregates them
robustly (norm clipping to the median norm, then the configured rule), takes the outer step
(plain SGD at lr 2 by default, as SparseLoCo prescribes; Nesterov for dense updates) and
publishes version v+1: with a sparse codec, the merged step re-sparsified to one upload's budget
(``subnet.versions.delta``: peers apply it themselves, bit for bit), else a lossless patch against
v; a full checkpoint every K versions, and a signed manifest naming the version and its hash.
It also publishes the dataset to its bucket, so every peer trains and scores on the same shards.

The role is a composition; each part owns its state and says what of it is saved:

- ``holder_setup.py``: the dataset published to the bucket, and the holder's own model line;
- ``model_line.py``: a model line (model, outer optimizer, publisher, versions, error feedback,
  persistence guard) and its state, filed under the state file's names;
- ``score_reads.py``: whose score reports count, and what each signed report says;
- ``merger.py``: the merge of one window into the line advanced now (the ``merge`` action's work);
- ``releases.py``: the publication of a line's merged window as its next version;
- ``points.py``: one model line per sweep point; ``equivocation.py``: the senders caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from ..compression import build_compressor
from ..config import ConfigError
from ..data import TokenDataset
from ..storage.keys import ObjectKind
from .actions.consensus import consensus
from .actions.grants import admit, grant_data
from .actions.ring import final_merge
from .actions.sweep import fan_out
from .base import BaseNeuron
from .equivocation import Caught
from .gates import GATES
from .holder_setup import own_line, publish_dataset
from .merge_result import MergeResult
from .merger import Merger
from .model_line import ModelLine, OnLine, line_record, line_state
from .points import Points
from .releases import Releases
from .rules import AGGREGATION_RULES, STOP_RULES
from .runtime import Runtime
from .score_reads import ScoreReads
from .steps import Action, FanOutParams, GrantParams, MergeParams, Step, StepParams

__all__ = ["MergeResult", "ModelHolder", "publish_dataset"]


class ModelHolder(BaseNeuron):
    """Merges, steps and publishes; the source of every model version."""

    role = "holder"

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        if rt.hotkey not in rt.roster.in_slot(self.slot.name):
            holders = ", ".join(rt.roster.in_slot(self.slot.name)) or "nobody"
            raise ConfigError(
                f"this wallet's hotkey {rt.hotkey} does not fill slot {self.slot.name} "
                f"(filled by {holders}); peers would not follow its versions"
            )
        # None for a slot that merges no updates (consensus, a grant-only lead, a collector)
        self.grads = rt.lane_read(self.slot, ObjectKind.GRADIENT.value)
        # None in topologies without scorers: merge weights then come from units or equality.
        # A slot reading consensus weights treats them as its one trusted report.
        self.scores = rt.lane_read(self.slot, ObjectKind.SCORES.value) or rt.lane_read(
            self.slot, ObjectKind.WEIGHTS.value
        )
        self.reads = ScoreReads(rt, self.scores)
        # Senders caught serving other bytes than a validator scored: named in a next version
        self.caught = Caught()
        self.admitted: list[str] | None = None  # the trainers ``admit`` let in (None: not run)

    def setup(self) -> None:
        """Publish the dataset to our bucket; build the model line, the merge and publication."""
        rt, p = self.rt, self.rt.cfg.protocol
        publish_dataset(rt)
        self.data: TokenDataset = rt.dataset()
        self.aggregation = AGGREGATION_RULES[rt.plan.aggregation["rule"]](p, rt.plan.aggregation)
        self.compressor = build_compressor(p.compression)
        self.own = own_line(rt, self.slot, self.data, self.aggregation)
        self.line = self.own  # the line merged and published now (a sweep point's, lent)
        self.releases = Releases(rt, self.data, self.caught, self.save)
        codec = (self.data, self.aggregation, self.compressor)
        line = self.current_line
        self.merger = Merger(
            rt, self.grads, self.reads, self.caught, codec, line, self.publish_pending, self.save
        )
        self.points = Points(self)  # one model per sweep point, if the slot's steps name any
        self.points.build()

    def merge(self, step: Step) -> MergeResult:
        """The ``merge`` action: merge the window and publish the next model version (with
        ``per_point``: each sweep point's workers into that point's model)."""
        if step.params.get("per_point") and self.points.lines:
            return self.points.merge(step.window)
        result = self.step(step.window)
        self.publish(step.window, result)
        return result

    admit = admit
    consensus = consensus
    fan_out = fan_out
    final_merge = final_merge
    grant_data = grant_data
    actions: ClassVar[dict[str, Action]] = {
        "merge": merge,
        "admit": admit,
        "consensus": consensus,
        "fan_out": fan_out,
        "final_merge": final_merge,
        "grant_data": grant_data,
    }
    gates = GATES  # the conditions a step of the plan may wait for
    stop_rules = STOP_RULES
    params: ClassVar[Mapping[str, type[StepParams]]] = {
        "merge": MergeParams,
        "fan_out": FanOutParams,
        "grant_data": GrantParams,
    }
    # The line it advances now: its own, or a sweep point's while that point merges
    model = OnLine()
    outer = OnLine()
    publisher = OnLine()
    model_lane = OnLine()
    version = OnLine()
    unpublished = OnLine()
    broadcast = OnLine()
    pending_delta = OnLine()
    guard = OnLine()  # the persistence guard (its own line only)
    saved = ("own", "caught", "admitted", "points")
    rebuilt = (
        *("grads", "scores", "reads", "data", "aggregation", "compressor", "line"),
        *("releases", "merger"),
    )

    def current_line(self) -> ModelLine:
        """The line merged and published now: its own, or a sweep point's while it merges."""
        return self.line

    def trusted(self) -> set[str]:
        """Scorers whose reports count: writers of the score lane holding ``runs.score``."""
        return self.reads.trusted()

    def reports(self, window: int, trusted: set[str]) -> dict[str, dict[str, float]]:
        """Window scores from each trusted validator's signed report (bad ones are skipped)."""
        return self.reads.reports(window, trusted)

    def resume(self) -> None:
        """Continue from local state, or from what the bucket says was published last."""
        super().resume()
        self.points.resume()
        if "model" not in self.slot.holds:
            return  # a slot that holds no model (consensus, a grant-only lead) publishes none
        window = self.releases.resume(self.line)
        if window is not None:  # continued from the bucket: its window was handled
            self.last_window = max(self.last_window, window)

    def step(self, window: int, senders: list[str] | None = None) -> MergeResult:
        """Merge ``window``'s uploads into the line advanced now (publication is
        :meth:`publish`); from ``senders`` only, when given (a sweep point's workers)."""
        return self.merger.merge(window, senders)

    def publish(self, window: int, result: MergeResult) -> None:
        """Publish a merged window as the next model version."""
        if result.merged:
            self.publish_pending(result)

    def publish_pending(self, result: MergeResult | None) -> None:
        """Publish the merged model as the next version (nothing to do if it is out already).

        ``result`` is None for a merge retried from an earlier window: its figures are gone.
        """
        self.releases.publish_pending(self.line, result)

    def heldout_loss(self) -> float:
        """The held-out loss of the model of the line advanced now."""
        return self.releases.heldout_loss(self.line)

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Its own line (model, outer optimizer, versions, error feedback, guard), the senders
        caught, the trainers admitted and the sweep points' lines."""
        meta, tensors = line_record(self.own)  # also while a sweep point's line is merged
        points_meta, points = self.points.state()
        meta |= {"caught": self.caught.state_dict(), "admitted": self.admitted, **points_meta}
        return meta, tensors | points

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        self.own.load_state_dict(line_state(meta, tensors))
        self.caught.load_state_dict(meta.get("caught", {}))
        admitted = meta.get("admitted")
        self.admitted = None if admitted is None else [str(hk) for hk in admitted]
        self.points.restore(meta, tensors)
