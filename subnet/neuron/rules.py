"""The rule registries a run plan names: data rules, merge-weights rules and the rest.

Plain dicts from the name a spec uses to the code that implements it. The completeness test
(``tests/topology/test_registries.py``) checks every builtin spec against them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from typing import Any

from ..config import ProtocolConfig
from ..data import TokenDataset, assign_samples
from ..scoring import merge_weights, normalize
from ..training.config import AggregationConfig, InnerConfig, OuterConfig
from .actions.consensus import consensus_rule
from .actions.rounds import loss_below

# (runtime, dataset, window) -> (hotkey -> the sample ids it trains on in that window)
DataRule = Callable[[Any, TokenDataset, int], Callable[[str], list[int]]]
# (reports validator -> {miner: score}, trusted validators, units per contributor) -> weights
MergeWeightsRule = Callable[
    [Mapping[str, Mapping[str, float]], Set[str], Mapping[str, int]], dict[str, float]
]


def inner_steps(rt: Any) -> int:
    """H: the ``inner_steps`` of the plan's ``train`` step, else the protocol's.

    Read from the plan, not from the step at hand, so the trainer and every reader checking its
    receipt count the same samples.
    """
    for slot in rt.plan.slots.values():
        for step in slot.steps:
            if step.action == "train" and "inner_steps" in step.params:
                return int(step.params["inner_steps"])
    return rt.cfg.protocol.inner.steps


def lane_data_rule(plan: Any, lane: str | None) -> str:
    """The data rule of the uploads on ``lane``: the writing step's own, else the plan's.

    A trainer of two models trains each on its step's rule (``@beam/two-models``: model A on
    granted units, model B on assigned samples); the reader of a lane checks receipts with the
    rule of the step that wrote it.
    """
    for slot in plan.slots.values():
        for step in slot.steps:
            if lane is not None and step.lane == lane and step.data_rule:
                return step.data_rule
    return plan.data_rule


def inner_config(rt: Any) -> InnerConfig:
    """The protocol's inner settings with the plan's H."""
    return rt.cfg.protocol.inner.model_copy(update={"steps": inner_steps(rt)})


def samples_per_window(rt: Any) -> int:
    """How many samples a trainer works on per window (H steps x micro-batch x accumulation)."""
    inner = rt.cfg.protocol.inner
    return inner_steps(rt) * inner.micro_batch * inner.accumulation


def assigned(rt: Any, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """``hotkey -> sample ids``: a pure function of (protocol seed, window, hotkey)."""
    seed, n, total = rt.cfg.protocol.seed, samples_per_window(rt), data.split_samples("train")
    return lambda hotkey: assign_samples(seed, window, hotkey, n, total)


def _room_rules() -> tuple[DataRule, DataRule]:
    from .actions.grants import granted
    from .actions.shares import file_shares

    return granted, file_shares


_granted, _file_shares = _room_rules()
DATA_RULES: Mapping[str, DataRule] = {
    "assigned": assigned,
    "granted": _granted,  # the units a data.grant holder granted for the window (signed)
    "file_shares": _file_shares,  # a sticky contiguous share of the train split per trainer
}


def by_units(
    reports: Mapping[str, Mapping[str, float]], trusted: Set[str], units: Mapping[str, int]
) -> dict[str, float]:
    """Each contributor by the data units it trained (scores are not consulted)."""
    return normalize({hk: float(n) for hk, n in sorted(units.items())})


def equal(
    reports: Mapping[str, Mapping[str, float]], trusted: Set[str], units: Mapping[str, int]
) -> dict[str, float]:
    """Every contributor alike (a fixed cohort doing the same work)."""
    return normalize({hk: 1.0 for hk in sorted(units)})


MERGE_WEIGHTS: Mapping[str, MergeWeightsRule] = {
    "median_score": merge_weights,  # median of the trusted scores; units when nobody scored
    "units": by_units,
    "equal": equal,
    "consensus": consensus_rule,  # the consensus slot's signed weights (the only trusted report)
}

# Aggregation and outer step, from the plan's [aggregation] / [outer] tables. "protocol" takes
# them from the shared ProtocolConfig (subnet mode); the others build them from the table.
AggregationRule = Callable[[ProtocolConfig, Mapping[str, Any]], AggregationConfig]
OuterRule = Callable[[ProtocolConfig, Mapping[str, Any]], OuterConfig]


def _fields(model: type, table: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """The entries of ``table`` that ``model`` has fields for, plus ``fixed``."""
    return {**{k: v for k, v in table.items() if k in model.model_fields}, **fixed}


AGGREGATION_RULES: Mapping[str, AggregationRule] = {
    "protocol": lambda protocol, table: protocol.aggregation,
    "mean": lambda protocol, table: AggregationConfig(
        **_fields(AggregationConfig, table, rule="mean")
    ),  # fmt: skip
}
OUTER_RULES: Mapping[str, OuterRule] = {
    "protocol": lambda protocol, table: protocol.outer,
    "nesterov": lambda protocol, table: OuterConfig(**_fields(OuterConfig, table)),
    "fedavg": lambda protocol, table: OuterConfig(**_fields(OuterConfig, table)),
}

# When a run ends, asked by the loop after each window: (neuron, [stop] table) -> stop now?
StopRule = Callable[[Any, Mapping[str, Any]], bool]
STOP_RULES: Mapping[str, StopRule] = {
    "never": lambda neuron, table: False,  # a subnet trains on
    # every member counts windows from the same clock, so all stop after the same one
    "rounds": lambda neuron, table: neuron.last_window + 1 >= int(table["rounds"]),
    "loss_below": loss_below,  # the decider's signed final marker, or max_rounds
}
