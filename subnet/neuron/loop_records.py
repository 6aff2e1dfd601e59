"""The records the one loop writes of itself: the ``plan`` record when a neuron starts and a
``step`` record per step it runs (``BaseNeuron.log_plan``, ``BaseNeuron.timed``)."""

from __future__ import annotations

from typing import Any

from loguru import logger

from ..topology import SlotPlan
from .runtime import Runtime
from .steps import Step


def plan_record(rt: Runtime, slot: SlotPlan, role: str) -> dict[str, Any]:
    """The topology, this member's slot and steps, and the plan's lanes (who writes and reads
    each): the run page draws the lanes and each slot's rounds from it."""
    plan = rt.plan
    lanes = {
        name: {
            "kind": lane.kind,
            "mode": lane.mode,
            "writers": list(lane.writers),
            "readers": list(lane.readers),
        }
        for name, lane in plan.lanes.items()
    }
    return dict(
        ref=plan.ref,
        digest=plan.digest,
        slot=slot.name,
        hotkey=rt.hotkey,
        role=role,
        steps=[s.action for s in slot.steps],
        lanes=lanes,
    )


def step_record(rt: Runtime, role: str, step: Step, seconds: float) -> dict[str, Any]:
    """What one step cost and the offsets it started and ended at (a local run sizes its
    windows from these); without ``end_offset`` when the clock cannot be read."""
    last = rt.windows.phase(step.plan.phase)[1]
    record: dict[str, Any] = dict(window=step.window, action=step.action, offset=step.offset)
    record.update(phase=step.plan.phase, last_offset=last, seconds=round(seconds, 3))
    try:
        record["end_offset"] = rt.clock.now() - rt.windows.start(step.window)
    except Exception as error:  # noqa: BLE001 - best effort: the record goes without it
        logger.debug("{}: clock unreadable after {}: {}", role, step, error)
    return record


def late_step_warning(role: str, step: Step, record: dict[str, Any], seconds: float) -> None:
    """Say in the log, with the numbers, when a step ended past its phase: whoever waited for
    its output may have gone on without it."""
    end, last = record.get("end_offset"), record["last_offset"]
    if end is not None and end > last:
        logger.warning(
            "{}: {} ended at offset {}, {} tick(s) past its phase (last offset {}): it took "
            "{:.1f} s from offset {}",
            role,
            step,
            end,
            end - last,
            last,
            seconds,
            step.offset,
        )
