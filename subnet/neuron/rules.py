"""The rule registries a run plan names: data rules, merge-weights rules and the rest.

Plain dicts from the name a spec uses to the code that implements it. The completeness test
(``tests/topology/test_registries.py``) checks every builtin spec against them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from typing import Any

from ..data import TokenDataset, assign_samples
from ..scoring import merge_weights

# (runtime, dataset, window) -> (hotkey -> the sample ids it trains on in that window)
DataRule = Callable[[Any, TokenDataset, int], Callable[[str], list[int]]]
# (reports validator -> {miner: score}, trusted validators, units per contributor) -> weights
MergeWeightsRule = Callable[
    [Mapping[str, Mapping[str, float]], Set[str], Mapping[str, int]], dict[str, float]
]


def samples_per_window(rt: Any) -> int:
    """How many samples a trainer works on per window (H steps x micro-batch x accumulation)."""
    inner = rt.cfg.protocol.inner
    return inner.steps * inner.micro_batch * inner.accumulation


def assigned(rt: Any, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """``hotkey -> sample ids``: a pure function of (protocol seed, window, hotkey)."""
    seed, n, total = rt.cfg.protocol.seed, samples_per_window(rt), data.split_samples("train")
    return lambda hotkey: assign_samples(seed, window, hotkey, n, total)


DATA_RULES: Mapping[str, DataRule] = {"assigned": assigned}

# Median of the trusted scorers' scores; data units when nobody scored the window.
MERGE_WEIGHTS: Mapping[str, MergeWeightsRule] = {"median_score": merge_weights}

# Aggregation and outer step: "protocol" takes them from the shared ProtocolConfig.
AGGREGATION_RULES: Mapping[str, Callable[[Any], Any]] = {
    "protocol": lambda protocol: protocol.aggregation
}
OUTER_RULES: Mapping[str, Callable[[Any], Any]] = {"protocol": lambda protocol: protocol.outer}

# When a run ends: "never" (a subnet trains on).
STOP_RULES: Mapping[str, Callable[[Any], bool]] = {"never": lambda neuron: False}
