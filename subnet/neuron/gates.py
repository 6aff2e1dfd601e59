"""Gates: conditions a step waits for, checked by the loop at every tick of the step's phase.

A gate replaces a wait loop that used to hide inside a step: the loop asks ``ready`` once per
tick, and runs the step when every gate passes. A gate that has not passed by its lapse offset
(by default the last offset of the step's phase) lets the step run anyway, logged, so one slow
peer costs freshness, never the window.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..config import WindowConfig
from ..storage.keys import ObjectKind
from .actions.consensus import weights_out
from .actions.grants import granted_gate, granted_uploads
from .actions.presence import objects_present
from .actions.ring import predecessor_in
from .actions.rounds import final_round, first_round
from .actions.tree import children_in
from .context import Follower, Member, Revealer
from .steps import Gate, Step, never


def version_out(neuron: Follower, step: Step) -> bool:
    """The merge of the previous window is published (the model this window starts from: the
    one of the model lane the step reads, for a trainer of several models)."""
    return neuron.replica_of(step).latest_window() >= step.window - 1


# What writers upload once per window: updates, and whole models (gossip).
UPLOAD_KINDS = (ObjectKind.GRADIENT.value, ObjectKind.CHECKPOINT.value)


def all_uploads(neuron: Member, step: Step) -> bool:
    """Every member of every writer slot of the lanes the step reads has its object there."""
    rt = neuron.rt
    for name in step.plan.reads:
        lane = rt.plan.lanes[name]
        if lane.kind not in UPLOAD_KINDS:
            continue
        inbox, writers = rt.inbox(name), rt.writers(name)
        if not objects_present(inbox, ObjectKind(lane.kind), step.window, writers, rt.readers.get):
            return False
    return True


def revealed(neuron: Revealer, step: Step) -> bool:
    """Every upload this validator holds a commit for is revealed, on each commit-reveal lane
    the step reads (the commits are the validator's snapshot: ``commits.CommitSnapshot``)."""
    rt = neuron.rt
    for name in step.plan.reads:
        if not rt.plan.lanes[name].commit_reveal:
            continue
        committed = neuron.committed(step.window)  # a reader that keeps none waits for none
        inbox = rt.inbox(name)
        if not objects_present(inbox, ObjectKind.GRADIENT, step.window, committed, rt.readers.get):
            return False
    return True


def reveal_lapse(cfg: WindowConfig) -> int:
    """``window.reveal_by``, inside the score phase: a commit that is never revealed (withheld,
    or its sender went down) holds the scoring up that long and no longer."""
    return min(cfg.reveal_by, cfg.report_deadline - 1)


# Normally the previous merge is out already; a slow holder gets a quarter of the upload phase.
GATES: Mapping[str, Gate] = {
    "version_out": Gate(
        "version_out", version_out, lambda w: max(1, w.upload_deadline // 4), "version w-1 is out"
    ),
    "all_uploads": Gate(
        "all_uploads", all_uploads, None, "all expected uploads of the lanes read are present"
    ),
    "revealed": Gate("revealed", revealed, reveal_lapse, "every committed upload is revealed"),
    "children_in": Gate("children_in", children_in, None, "every tree child's partial is in"),
    "predecessor_in": Gate(
        "predecessor_in", predecessor_in, None, "the ring predecessor's model is in"
    ),
    "granted": Gate("granted", granted_gate, never, "this member holds a grant for the round"),
    "granted_uploads": Gate(
        "granted_uploads", granted_uploads, None, "every member granted data this round has sent"
    ),
    "weights_out": Gate("weights_out", weights_out, None, "the round's consensus weights are out"),
    "first_round": Gate("first_round", first_round, never, "the run's first round"),
    "final_round": Gate("final_round", final_round, never, "the run's last round"),
}
