"""Training core: the inner loop, pseudo-gradients, outer optimizers and aggregation rules.

Pure tensor code without I/O, shared by every role and topology: see DESIGN.md section 3.
"""

from subnet.training.aggregation import (
    AGGREGATORS,
    aggregate,
    aggregate_stream,
    clip_scales,
    clip_to_median_norm,
    coordinate_median,
    sparse_mean,
    trimmed_mean,
    weighted_mean,
)
from subnet.training.config import AggregationConfig, InnerConfig, OuterConfig
from subnet.training.inner import InnerResult, build_inner_optimizer, train_inner
from subnet.training.outer import OUTER_OPTIMIZERS, OuterSGD, build_outer_optimizer
from subnet.training.pseudograd import load_parameters, pseudo_gradient, snapshot

__all__ = [
    "AGGREGATORS",
    "OUTER_OPTIMIZERS",
    "AggregationConfig",
    "InnerConfig",
    "InnerResult",
    "OuterConfig",
    "OuterSGD",
    "aggregate",
    "aggregate_stream",
    "build_inner_optimizer",
    "build_outer_optimizer",
    "clip_scales",
    "clip_to_median_norm",
    "coordinate_median",
    "load_parameters",
    "pseudo_gradient",
    "snapshot",
    "sparse_mean",
    "train_inner",
    "trimmed_mean",
    "weighted_mean",
]
