"""Scoring and weight policy: pure functions from measured losses to scores, weights and merges.

No I/O here: the validator feeds in per-sample losses (measured by ``subnet.scoring.assess``, the
one module that runs the model) and index sets, and reads back verdicts, moving scores and chain
weights; the model holder feeds in score reports and reads back merge weights.

The names below are loaded on first use (``subnet.lazy``): importing the package, or its
config module alone, imports no torch.
"""

from subnet.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "config": ["ScoringConfig"],
        "copies": [
            "FingerprintLog",
            "Match",
            "Upload",
            "detect_copies",
            "find_matches",
            "index_overlap",
            "judge_matches",
            "overlap_summary",
            "twins",
        ],
        "evidence": ["Specificity", "specificity", "usefulness"],
        "merge": ["merge_weights"],
        "record": ["extend_records"],
        "weights": ["normalize", "update_moving", "weights_for_chain"],
        "window": [
            "Evaluation",
            "Reason",
            "Verdict",
            "gain_ratios",
            "random_reference",
            "score_window",
            "window_score",
        ],
    },
)
