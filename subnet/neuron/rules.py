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
from ..training.config import AggregationConfig, OuterConfig
from .actions.consensus import consensus_rule
from .actions.grants import granted
from .actions.rounds import loss_below
from .actions.shares import check_file_shares, file_shares
from .bindings import samples_per_window
from .runtime import Runtime
from .steps import StopRule

# (runtime, dataset, window) -> (hotkey -> the sample ids it trains on in that window)
DataRule = Callable[[Runtime, TokenDataset, int], Callable[[str], list[int]]]
# (reports validator -> {miner: score}, trusted validators, units per contributor) -> weights
MergeWeightsRule = Callable[
    [Mapping[str, Mapping[str, float]], Set[str], Mapping[str, int]], dict[str, float]
]


def assigned(rt: Runtime, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """``hotkey -> sample ids``: a pure function of (protocol seed, window, hotkey)."""
    seed, n, total = rt.cfg.protocol.seed, samples_per_window(rt), data.split_samples("train")
    return lambda hotkey: assign_samples(seed, window, hotkey, n, total)


DATA_RULES: Mapping[str, DataRule] = {
    "assigned": assigned,
    "granted": granted,  # the units a data.grant holder granted for the window (signed)
    "file_shares": file_shares,  # each trainer's own whole files of the train split, sticky
}
# What a data rule needs of the dataset, checked once at a trainer's setup so a run that cannot
# work stops with one line (a rule not listed needs nothing): (runtime, dataset) -> None
DATA_CHECKS: Mapping[str, Callable[[Any, TokenDataset], None]] = {
    "file_shares": check_file_shares,  # a file per trainer
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
    ),
}
OUTER_RULES: Mapping[str, OuterRule] = {
    "protocol": lambda protocol, table: protocol.outer,
    "nesterov": lambda protocol, table: OuterConfig(**_fields(OuterConfig, table)),
    "fedavg": lambda protocol, table: OuterConfig(**_fields(OuterConfig, table)),
}

# When a run ends, asked by the loop after each window: (neuron, [stop] table) -> stop now?
STOP_RULES: Mapping[str, StopRule] = {
    "never": lambda neuron, table: False,  # a subnet trains on
    # every member counts windows from the same clock, so all stop after the same one
    "rounds": lambda neuron, table: neuron.last_window + 1 >= int(table["rounds"]),
    "loss_below": loss_below,  # the decider's signed final marker, or max_rounds
}
