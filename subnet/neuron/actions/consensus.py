"""Consensus: the validators' scores become one weight vector per round, on a weights lane.

The consensus slot (a holder-class slot holding ``weights``) reads every trusted validator's
signed score report for the round (writers of the score lane with ``runs.score``), takes each
miner's median score (one dishonest validator cannot move a median of three), normalizes, and
publishes the vector as a signed object on the weights lane (``consensus``). The model holder
waits for it (gate ``weights_out``) and merges by it (merge weights ``consensus``: the weight
object's writers are the only reports it trusts). On a chain, the chain's own epoch plays this
slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from loguru import logger

from ...scoring import merge_weights
from ...storage.keys import ObjectKind
from ...wire import WeightsMeta
from ..context import Consensing, Member
from ..steps import Step
from .presence import objects_present
from .signed import put_message


def median_weights(
    reports: Mapping[str, Mapping[str, float]], trusted: Set[str]
) -> dict[str, float]:
    """Each scored miner's median trusted score, normalized to sum 1 (empty if all are 0)."""
    miners = sorted({m for hk, r in reports.items() if hk in trusted for m in r})
    # every miner here was scored by a trusted validator, so merge_weights never falls back
    return merge_weights(reports, trusted, dict.fromkeys(miners, 1)) if miners else {}


def consensus_rule(
    reports: Mapping[str, Mapping[str, float]], trusted: Set[str], units: Mapping[str, int]
) -> dict[str, float]:
    """Merge weights: the consensus vector (``reports`` are the trusted weight objects), over the
    contributors present; units when no weight object came."""
    return merge_weights(reports, trusted, units)


@dataclass
class Consensus:
    """The ``consensus`` action's result."""

    window: int
    weights: dict[str, float] = field(default_factory=dict)
    validators: list[str] = field(default_factory=list)
    key: str | None = None


def consensus(holder: Consensing, step: Step) -> Consensus:
    """Action: median the round's trusted score reports into weights; publish them signed."""
    trusted = holder.trusted()
    reports = holder.reports(step.window, trusted)
    weights = median_weights(reports, trusted)
    message = WeightsMeta(scores=weights)  # the holder reads it like a report's scores
    key = put_message(holder.rt, ObjectKind.WEIGHTS, step.window, step.lane, message)
    holder.rt.metrics.log(
        "consensus", window=step.window, weights=weights, validators=sorted(reports)
    )
    logger.info(
        "window {}: consensus of {} reports over {} miners", step.window, len(reports), len(weights)
    )
    return Consensus(step.window, weights, sorted(reports), key)


def weights_out(neuron: Member, step: Step) -> bool:
    """Gate: the round's consensus weights are out on the weights lane read."""
    rt = neuron.rt
    for lane in step.plan.reads:
        if rt.plan.lanes[lane].kind != ObjectKind.WEIGHTS.value:
            continue
        inbox, writers = rt.inbox(lane), rt.writers(lane)
        if not objects_present(inbox, ObjectKind.WEIGHTS, step.window, writers, rt.reader):
            return False
    return True
