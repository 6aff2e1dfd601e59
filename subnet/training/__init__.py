"""Training core: the inner loop, pseudo-gradients, outer optimizers and aggregation rules.

Pure tensor code without I/O, shared by every role and topology: see DESIGN.md section 3.

The names below are loaded on first use (``subnet.lazy``): importing the package, or its
config module alone, imports no torch.
"""

from subnet.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "aggregation": [
            "AGGREGATORS",
            "aggregate",
            "aggregate_stream",
            "clip_scales",
            "clip_to_median_norm",
            "coordinate_median",
            "sparse_mean",
            "trimmed_mean",
            "weighted_mean",
        ],
        "config": ["AggregationConfig", "InnerConfig", "OuterConfig"],
        "inner": ["InnerResult", "build_inner_optimizer", "train_inner"],
        "outer": ["OUTER_OPTIMIZERS", "OuterSGD", "build_outer_optimizer"],
        "pseudograd": ["load_parameters", "pseudo_gradient", "snapshot"],
    },
)
