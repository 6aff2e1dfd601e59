"""The real registries: what code exists for the names a topology spec may use.

Plain dicts, greppable: role classes (each with its own ``actions`` dict), gates, data rules,
merge-weights rules, aggregation, outer and stop rules. ``REGISTRIES`` is what the plan
compiler checks every spec against; ``tests/topology/test_registries.py`` lists what each
builtin spec still misses.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..storage.keys import ObjectKind
from ..topology import Registries
from ..training.config import AggregationConfig, OuterConfig
from .base import BaseNeuron
from .gates import GATES
from .holder import ModelHolder
from .miner import Miner
from .rules import AGGREGATION_RULES, DATA_RULES, MERGE_WEIGHTS, OUTER_RULES, STOP_RULES
from .steps import StepParams
from .validator import Validator

ROLE_CLASSES: Mapping[str, type[BaseNeuron]] = {
    "miner": Miner,
    "validator": Validator,
    "holder": ModelHolder,
}


def build_registries() -> Registries:
    """The compiler's view of the registries above (names only)."""
    return Registries(
        actions={name: frozenset(cls.actions) for name, cls in ROLE_CLASSES.items()},
        step_params={
            name: {action: cls.params.get(action, StepParams) for action in cls.actions}
            for name, cls in ROLE_CLASSES.items()
        },
        gates=frozenset(GATES),
        merge_weights=frozenset(MERGE_WEIGHTS),
        data_rules=frozenset(DATA_RULES),
        stop_rules=frozenset(STOP_RULES),
        aggregation_rules=frozenset(AGGREGATION_RULES),
        outer_rules=frozenset(OUTER_RULES),
        lane_kinds=frozenset(kind.value for kind in ObjectKind),
        # the tree action reads tree_fanout from [aggregation] (subnet.neuron.actions.tree)
        aggregation_keys=frozenset(AggregationConfig.model_fields) | {"tree_fanout"},
        outer_keys=frozenset(OuterConfig.model_fields),
    )


REGISTRIES = build_registries()
