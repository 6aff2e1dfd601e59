"""The tree all-reduce (``reduce``): each worker averages its subtree and passes it up.

Workers are the members writing the partials lane, sorted by hotkey; worker ``i``'s parent is
``(i - 1) // fanout`` and the root's (worker 0) is the lead, which merges the root's partial
alone. Each partial is the sample-weighted mean of the subtree's pseudo-gradients, so the
root's is the plain mean of every worker's (``combine`` of the children's partials and one's
own). A child's weight is never its claim: it is the number of subtree members it says it
covers, capped by the tree's subtree size, times the samples each trains per round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from loguru import logger

from ...storage.keys import ObjectKind
from ...versions import SyncError
from ...wire import GradientMeta, Reason
from ..bindings import samples_per_window
from ..context import Member, Trainer
from ..runtime import Runtime
from ..steps import Step
from ..uploads import Received, WindowUploads, collect_uploads
from .presence import objects_present

Delta = Mapping[str, torch.Tensor]


def tree_children(index: int, n: int, fanout: int) -> list[int]:
    """The children of node ``index`` in a complete ``fanout``-ary tree over ``n`` nodes."""
    first = index * fanout + 1
    return list(range(first, min(n, first + fanout)))


def subtree_size(index: int, n: int, fanout: int) -> int:
    """How many nodes the subtree rooted at ``index`` has (itself included)."""
    return 1 + sum(subtree_size(c, n, fanout) for c in tree_children(index, n, fanout))


def combine(parts: Sequence[tuple[Delta, float]]) -> dict[str, torch.Tensor]:
    """The weighted mean of ``(delta, weight)`` parts (weights need not sum to 1)."""
    total = sum(w for _, w in parts)
    if total <= 0:
        raise ArithmeticError("no weight to combine")
    names = parts[0][0].keys()
    return {
        k: sum(d[k].double() * (w / total) for d, w in parts).to(parts[0][0][k].dtype)
        for k in names
    }


def fanout_of(rt: Runtime, step: Step) -> int:
    """The tree's fanout: the step's ``fanout``, else the aggregation's ``tree_fanout``, else 2."""
    return int(step.params.get("fanout", rt.plan.aggregation.get("tree_fanout", 2)))


def tree_senders(rt: Runtime, lane: str) -> list[str] | None:
    """Whose uploads on ``lane`` a merge reads: the tree root alone when the plan aggregates by a
    tree (``tree_fanout``), else None (every writer)."""
    if "tree_fanout" not in rt.plan.aggregation:
        return None
    return rt.writers(lane)[:1]


def children_of(rt: Runtime, lane: str, fanout: int) -> list[str]:
    """The members whose partials on ``lane`` this member waits for: its tree children, or the
    root for a reader that is not in the tree (the lead)."""
    workers = rt.writers(lane)
    if rt.hotkey not in workers:
        return workers[:1]
    index = workers.index(rt.hotkey)
    return [workers[c] for c in tree_children(index, len(workers), fanout)]


def children_in(neuron: Member, step: Step) -> bool:
    """Gate: every tree child (the lead: the root) has its partial on the lane read."""
    rt = neuron.rt
    for lane in step.plan.reads:
        if rt.plan.lanes[lane].kind != ObjectKind.GRADIENT.value:
            continue
        kids = children_of(rt, lane, fanout_of(rt, step))
        inbox = rt.inbox(lane)
        if not objects_present(inbox, ObjectKind.GRADIENT, step.window, kids, rt.reader):
            return False
    return True


@dataclass
class Partial:
    """A subtree's partial mean, as sent to the parent (the ``reduce`` action's result)."""

    window: int
    members: int  # subtree members it covers
    children: dict[str, int] = field(default_factory=dict)  # child -> members it covered
    key: str | None = None


def reduce(miner: Trainer, step: Step) -> Partial:
    """Action: combine this window's own update with the tree children's partials; send it up.

    A child whose partial cannot be read, is refused, or fails while it is combined (any
    exception) is left out with its subtree, logged with its reason; the others still go up."""
    rt, window = miner.rt, step.window
    own = miner.trained
    if own is None or miner.trained_window != window:
        raise SyncError("not_trained", f"nothing trained in window {window} to reduce")
    lane, fanout = step.lane, fanout_of(rt, step)
    workers = rt.writers(lane)
    index = workers.index(rt.hotkey)
    shapes = {k: tuple(v.shape) for k, v in miner.replica.state.items()}
    per_member = samples_per_window(rt)
    mine = GradientMeta.parse(own.metadata, window=window)
    parts: list[tuple[Delta, float]] = [(miner.compressor.decode(own.payload, shapes), 1.0)]
    losses = [] if mine.loss is None else [(mine.loss, 1.0)]
    tokens = mine.tokens  # the subtree's, as its members say (informational, never a weight)
    kids = [workers[c] for c in tree_children(index, len(workers), fanout)]
    got = collect_uploads(
        rt,
        window,
        kids,
        base_version=miner.replica.version,
        compressor=miner.compressor,
        shapes=shapes,
        assigned=miner.assigned(rt.plan.data_rule, window),
        lane=lane,
    )
    child_parts, child_losses, covered, child_tokens = _children_parts(
        rt, window, got, workers, fanout, per_member
    )
    parts += child_parts
    losses += child_losses
    tokens += child_tokens
    _log_left_out(window, kids, covered, got)
    mean = combine(parts)
    members = 1 + sum(covered.values())
    loss = sum(v * w for v, w in losses) / sum(w for _, w in losses) if losses else None
    update = {
        "members": members,
        "subtree_samples": members * per_member,
        "loss": loss,
        "tokens": tokens,
    }
    sent = mine.model_copy(update=update)
    key, _ = rt.outbox(lane).publish(
        ObjectKind.GRADIENT,
        window,
        miner.compressor.encode(mean),
        metadata=sent.wire(),
        base_version=miner.replica.version,
    )
    miner.log_train()  # the window's own training went out in this partial
    rt.metrics.log("reduce", window=window, members=members, children=covered, loss=loss)
    logger.info("window {}: reduced {} members' updates, sent up on {}", window, members, lane)
    return Partial(window, members, covered, key)


def _children_parts(
    rt: Runtime, window: int, got: WindowUploads, workers: list[str], fanout: int, per_member: int
) -> tuple[list[tuple[Delta, float]], list[tuple[float, float]], dict[str, int], int]:
    """The accepted children's ``(partial, weight)`` parts, ``(loss, weight)`` pairs, members
    covered and tokens; a child that fails here is moved to ``got.rejected``."""
    parts: list[tuple[Delta, float]] = []
    losses: list[tuple[float, float]] = []
    covered: dict[str, int] = {}
    tokens = 0
    for hotkey, upload in sorted(got.accepted.items()):
        cap = subtree_size(workers.index(hotkey), len(workers), fanout)
        try:
            part, members = child_part(upload, cap)
        except Exception as error:  # noqa: BLE001 - that child's partial, not our reduce
            logger.opt(exception=error).warning("window {}: child {} failed", window, hotkey[:8])
            got.rejected[hotkey] = Reason.UNREADABLE
            continue
        covered[hotkey] = members
        parts.append(part)
        # a child's claim, capped by what its members could train (as ``members`` is)
        tokens += min(upload.meta.tokens, members * per_member * rt.cfg.protocol.seq_len)
        if upload.meta.loss is not None:
            losses.append((upload.meta.loss, float(members)))
    return parts, losses, covered, tokens


def _log_left_out(
    window: int, kids: list[str], covered: dict[str, int], got: WindowUploads
) -> None:
    """Warn of each child whose subtree the partial leaves out, with its reason."""
    for hotkey in sorted(set(kids) - set(covered)):
        logger.warning(
            "window {}: no usable partial from child {} ({}); its subtree is left out",
            window,
            hotkey[:8],
            got.rejected.get(hotkey, "missing"),
        )


def child_part(upload: Received, cap: int) -> tuple[tuple[Delta, float], int]:
    """A child's ``(decoded partial, weight)`` and the members it covers: its signed
    ``members`` (1 when it names none: a leaf), capped by its subtree's size."""
    members = min(cap, upload.meta.members or 1)
    return (upload.decode(), float(members)), members


__all__ = ["children_in", "combine", "reduce", "subtree_size", "tree_children", "tree_senders"]
