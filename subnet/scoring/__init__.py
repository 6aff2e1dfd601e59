"""Scoring and weight policy: pure functions from measured losses to scores, weights and merges.

No I/O here: the validator feeds in per-sample losses (measured by ``subnet.scoring.assess``, the
one module that runs the model) and index sets, and reads back verdicts, moving scores and chain
weights; the model holder feeds in score reports and reads back merge weights.
"""

from subnet.scoring.config import ScoringConfig
from subnet.scoring.copies import (
    FingerprintLog,
    Match,
    Upload,
    detect_copies,
    find_matches,
    index_overlap,
    judge_matches,
    overlap_summary,
    twins,
)
from subnet.scoring.evidence import Specificity, specificity, usefulness
from subnet.scoring.merge import merge_weights
from subnet.scoring.record import extend_records
from subnet.scoring.weights import normalize, update_moving, weights_for_chain
from subnet.scoring.window import (
    Evaluation,
    Reason,
    Verdict,
    gain_ratios,
    random_reference,
    score_window,
    window_score,
)

__all__ = [
    "Evaluation",
    "FingerprintLog",
    "Match",
    "Specificity",
    "find_matches",
    "judge_matches",
    "twins",
    "overlap_summary",
    "specificity",
    "usefulness",
    "Reason",
    "ScoringConfig",
    "Upload",
    "Verdict",
    "detect_copies",
    "extend_records",
    "gain_ratios",
    "index_overlap",
    "merge_weights",
    "normalize",
    "score_window",
    "update_moving",
    "weights_for_chain",
    "random_reference",
    "window_score",
]
