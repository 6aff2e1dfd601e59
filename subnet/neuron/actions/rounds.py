"""Round gates (``first_round``, ``final_round``) and the ``loss_below`` stop rule.

``first_round`` and ``final_round`` are conditions, not waits: they never lapse, so a step
behind them simply does not run in the other rounds. ``loss_below`` is decided by one slot
(the ``[stop]`` table's ``by``): its member stops once its model's held-out loss is below
``threshold`` and publishes a signed final marker for that window on the ``final`` lane;
every other member stops once it reads that marker from that member (a marker from anyone
else is never read). Every member also stops after ``max_rounds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loguru import logger

from ...storage.keys import ObjectKind
from ...topology import RunPlan
from ...wire import FinalMark, FinalMeta
from ..context import Member, Stopping
from ..steps import Step
from .signed import get_message, put_message

FINAL_LANE = "final"


def last_round(plan: RunPlan) -> int | None:
    """The index of the run's last round, from the stop table (None: no fixed end)."""
    rounds = plan.stop.get("rounds", plan.stop.get("max_rounds"))
    return None if rounds is None else int(rounds) - 1


def first_round(neuron: Member, step: Step) -> bool:
    """Gate: this is the run's first round (window 0 of the run's clock)."""
    return step.window == 0


def final_round(neuron: Member, step: Step) -> bool:
    """Gate: this is the run's last round (per ``rounds`` or ``max_rounds``)."""
    last = last_round(neuron.rt.plan)
    return last is not None and step.window >= last


def decider(neuron: Member, table: Mapping[str, Any]) -> str | None:
    """The member of the ``by`` slot (the one whose marker counts), if any."""
    members = neuron.rt.roster.in_slot(str(table.get("by", "")))
    return members[0] if members else None


def loss_below(neuron: Stopping, table: Mapping[str, Any]) -> bool:
    """Stop rule: the decider's model is below ``threshold`` (its signed marker), or
    ``max_rounds`` are done."""
    rt, window = neuron.rt, neuron.last_window
    if window + 1 >= int(table.get("max_rounds", 10**9)):
        return True
    by = decider(neuron, table)
    if by is None or window < 0:
        return False
    if by == rt.hotkey:
        loss = neuron.heldout_loss()
        if loss is None or loss >= float(table["threshold"]):
            return False
        mark = FinalMeta(final=FinalMark(window=window, loss=loss))
        put_message(rt, ObjectKind.RUN_FINAL, window, FINAL_LANE, mark)
        logger.info(
            "loss {:.4f} below {}: final marker for window {} published",
            loss,
            table["threshold"],
            window,
        )
        return True
    # The marker for the window before ours is enough: the decider merges after our last step.
    return any(
        get_message(rt, by, ObjectKind.RUN_FINAL, w, FINAL_LANE, FinalMeta) is not None
        for w in (window, window - 1)
        if w >= 0
    )
