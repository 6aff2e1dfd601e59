"""Gossip on a ring (``mix``) and the merge of every worker's final model (``final_merge``).

Workers are the members writing the ring lane, sorted by hotkey; worker ``i`` reads worker
``i - 1`` (mod n). After its local steps a worker publishes its whole model on the ring lane
(``publish_model``, used by ``train`` for a lane of kind ``checkpoint``); ``mix`` then sets
``model = (1 - weight) * own + weight * predecessor`` and keeps it as the base of the next round
(the worker holds its model: nothing is reset to a global version). The collector's
``final_merge`` averages the final models of the last round and publishes the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from loguru import logger

from ...storage.base import StorageError
from ...storage.keys import ObjectKind
from ...training import load_parameters, snapshot
from ...wire import Reason, Rejected
from ..context import Collector, Member, Trainer
from ..merge_result import MergeResult
from ..runtime import Runtime
from ..steps import Step
from ..upload import Upload
from .presence import present

State = Mapping[str, torch.Tensor]


def predecessor(workers: list[str], hotkey: str) -> str:
    """The ring predecessor of ``hotkey`` among the sorted ``workers``."""
    return workers[(workers.index(hotkey) - 1) % len(workers)]


def mix_states(own: State, other: State, weight: float) -> dict[str, torch.Tensor]:
    """``(1 - weight) * own + weight * other``, tensor by tensor."""
    return {k: (1.0 - weight) * own[k] + weight * other[k] for k in own}


def trained_state(miner: Trainer) -> dict[str, torch.Tensor]:
    """The miner's model after this window's local steps: its base minus its pseudo-gradient."""
    shapes = {k: tuple(v.shape) for k, v in miner.replica.state.items()}
    delta = miner.compressor.decode(miner.trained.payload, shapes)
    return {k: miner.replica.state[k] - delta[k] for k in shapes}


def publish_model(miner: Trainer, window: int, upload: Upload, lane: str | None = None) -> None:
    """Publish the trained model (not the update) on a ``checkpoint`` lane, signed."""
    rt = miner.rt
    key, _ = rt.outbox(lane).publish(
        ObjectKind.CHECKPOINT,
        window,
        trained_state(miner),
        metadata=upload.metadata,
        base_version=miner.replica.version,
    )
    upload.key = key
    logger.info("published model for window {} on {}", window, lane)
    miner.log_train()


def fetch_model(
    rt: Runtime,
    hotkey: str,
    window: int,
    lane: str,
    shapes: Mapping[str, tuple[int, ...]],
    max_bytes: int,
) -> dict[str, torch.Tensor]:
    """``hotkey``'s verified model for ``window`` on ``lane``: ``Rejected`` if it is not one
    (another plan, shapes that differ, values not finite), ``StorageError`` if it is absent."""
    reader = rt.reader(hotkey)
    if reader is None:
        raise Rejected(Reason.NO_BUCKET, f"no readable bucket for {hotkey}")
    inbox = rt.inbox(lane)  # what it reads is signed, of this plan, and of finite floats
    envelope = inbox.fetch(reader, ObjectKind.CHECKPOINT, window, hotkey, max_bytes=max_bytes)
    tensors = dict(envelope.tensors)
    if {k: tuple(v.shape) for k, v in tensors.items()} != dict(shapes):
        raise Rejected(Reason.SHAPE_MISMATCH, "a model of other names or shapes")
    if not all(t.is_floating_point() for t in tensors.values()):
        raise Rejected(Reason.DTYPE_MISMATCH, "a model of integer tensors")
    return {k: t.float() for k, t in tensors.items()}


def unusable(window: int, which: str, hotkey: str, error: Exception) -> None:
    """Log a peer's model that cannot be used (a traceback when the failure is unforeseen)."""
    known = isinstance(error, (StorageError, Rejected))
    log = logger if known else logger.opt(exception=error)
    why = error.reason if isinstance(error, Rejected) else error
    log.warning("window {}: {} model of {} unusable ({})", window, which, hotkey[:8], why)


def ring_lane(rt: Runtime, step: Step) -> str:
    """The checkpoint lane the step reads."""
    return next(n for n in step.plan.reads if rt.plan.lanes[n].kind == ObjectKind.CHECKPOINT.value)


def predecessor_in(neuron: Member, step: Step) -> bool:
    """Gate: the ring predecessor's model for this window is on the ring lane."""
    rt = neuron.rt
    lane = ring_lane(rt, step)
    pred = predecessor(rt.writers(lane), rt.hotkey)
    return present(rt.reader(pred), rt.inbox(lane).key(ObjectKind.CHECKPOINT, step.window, pred))


@dataclass
class Mixed:
    """The ``mix`` action's result."""

    window: int
    predecessor: str
    weight: float  # the predecessor's weight actually applied (0 when its model was unusable)


def mix(miner: Trainer, step: Step) -> Mixed:
    """Action: mix the predecessor's model into ours; the result is the next round's base."""
    rt, window = miner.rt, step.window
    lane = ring_lane(rt, step)
    pred = predecessor(rt.writers(lane), rt.hotkey)
    own = trained_state(miner)
    weight = float(step.params.get("weight", 0.5))
    shapes = {k: tuple(v.shape) for k, v in own.items()}
    try:
        other = fetch_model(rt, pred, window, lane, shapes, miner.replica.max_bytes)
    except Exception as error:  # noqa: BLE001 - the predecessor's failure, never our round
        unusable(window, "predecessor", pred, error)
        other, weight = own, 0.0
    miner.replica.state = mix_states(own, other, weight)
    load_parameters(miner.replica.model, miner.replica.state)
    rt.metrics.log("mix", window=window, predecessor=pred, weight=weight)
    logger.info(
        "window {}: mixed {:.0%} of predecessor {}'s model into ours (the next round's base)",
        window,
        weight,
        pred[:8],
    )
    return Mixed(window, pred, weight)


def final_merge(holder: Collector, step: Step) -> MergeResult:
    """Action (holder): average the final models (those on the lanes read: the gossip
    workers'; and the holder's own sweep points' models) and publish the result."""
    rt, window = holder.rt, step.window
    lanes = [n for n in step.plan.reads if rt.plan.lanes[n].kind == ObjectKind.CHECKPOINT.value]
    line = holder.line  # the holder's own line (a sweep point's is lent only while it merges)
    params = snapshot(line.model)
    shapes = {k: tuple(v.shape) for k, v in params.items()}
    models: dict[str, dict[str, torch.Tensor]] = {}
    for lane in lanes:
        for hotkey in rt.writers(lane):
            try:
                models[hotkey] = fetch_model(rt, hotkey, window, lane, shapes, 1 << 31)
            except Exception as error:  # noqa: BLE001 - that worker's model, not the merge
                unusable(window, "final", hotkey, error)
    models |= holder.points.final_models()
    if not models:
        logger.info("window {}: no final models to merge", window)
        return MergeResult(window, False)
    share = 1.0 / len(models)
    merged = {k: sum(m[k] * share for m in models.values()) for k in shapes}
    load_parameters(line.model, merged)
    line.unpublished = window
    result = MergeResult(window, True, dict.fromkeys(sorted(models), share))
    holder.publish(window, result)
    return result
