"""Scoring and weight policy: pure functions from measured losses to scores, weights and merges.

No I/O here: the validator feeds in losses and index sets and reads back verdicts, moving scores
and chain weights; the model holder feeds in score reports and reads back merge weights.
"""

from subnet.scoring.config import ScoringConfig
from subnet.scoring.copies import Upload, detect_copies, index_overlap
from subnet.scoring.merge import merge_weights
from subnet.scoring.weights import normalize, update_moving, weights_for_chain
from subnet.scoring.window import Evaluation, Reason, Verdict, score_window, window_score

__all__ = [
    "Evaluation",
    "Reason",
    "ScoringConfig",
    "Upload",
    "Verdict",
    "detect_copies",
    "index_overlap",
    "merge_weights",
    "normalize",
    "score_window",
    "update_moving",
    "weights_for_chain",
    "window_score",
]
