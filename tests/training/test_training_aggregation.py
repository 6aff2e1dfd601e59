"""Aggregation rules against answers computed by hand."""

import typing

import pytest
import torch

from subnet.training import (
    AGGREGATORS,
    AggregationConfig,
    aggregate,
    clip_to_median_norm,
    coordinate_median,
    sparse_mean,
    trimmed_mean,
    weighted_mean,
)
from subnet.training.config import AggregationRule


def _u(*values: float) -> dict[str, torch.Tensor]:
    return {"w": torch.tensor(values)}


def test_weighted_mean_known_answer() -> None:
    out = weighted_mean([_u(1.0, 0.0), _u(4.0, 3.0)], [2.0, 1.0])
    torch.testing.assert_close(out["w"], torch.tensor([2.0, 1.0]))


def test_sparse_mean_averages_over_contributors_only() -> None:
    updates = [_u(2.0, 0.0, 0.0), _u(4.0, 6.0, 0.0), _u(0.0, 0.0, 0.0)]
    out = sparse_mean(updates, [1.0, 1.0, 1.0])
    torch.testing.assert_close(out["w"], torch.tensor([3.0, 6.0, 0.0]))
    weighted = sparse_mean(updates, [3.0, 1.0, 1.0])
    torch.testing.assert_close(weighted["w"], torch.tensor([2.5, 6.0, 0.0]))


def test_coordinate_median_odd_and_even_counts() -> None:
    odd = coordinate_median([_u(1.0, 9.0), _u(5.0, -1.0), _u(100.0, 3.0)])
    torch.testing.assert_close(odd["w"], torch.tensor([5.0, 3.0]))
    even = coordinate_median([_u(1.0), _u(2.0), _u(10.0), _u(-50.0)])
    torch.testing.assert_close(even["w"], torch.tensor([1.5]))


def test_median_and_trimmed_mean_ignore_zero_weight_contributors() -> None:
    out = coordinate_median([_u(1.0), _u(2.0), _u(1000.0)], [1.0, 1.0, 0.0])
    torch.testing.assert_close(out["w"], torch.tensor([1.5]))


def test_trimmed_mean_drops_the_extremes() -> None:
    updates = [_u(v) for v in (-100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 100.0)]
    out = trimmed_mean(updates, trim_ratio=0.1)  # floor(0.1 * 10) = 1 cut at each end
    torch.testing.assert_close(out["w"], torch.tensor([4.5]))
    with pytest.raises(ValueError):
        trimmed_mean(updates[:2], trim_ratio=0.5)


def test_clip_to_median_norm_known_answer() -> None:
    # Norms 5, 1, 10 -> median 5: the first is kept, the second untouched, the third halved.
    clipped = clip_to_median_norm([_u(3.0, 4.0), _u(0.6, 0.8), _u(6.0, 8.0)])
    torch.testing.assert_close(clipped[0]["w"], torch.tensor([3.0, 4.0]))
    torch.testing.assert_close(clipped[1]["w"], torch.tensor([0.6, 0.8]))
    torch.testing.assert_close(clipped[2]["w"], torch.tensor([3.0, 4.0]))


def test_norm_is_global_across_tensors() -> None:
    a = {"x": torch.tensor([3.0]), "y": torch.tensor([4.0])}  # norm 5
    b = {"x": torch.tensor([0.0]), "y": torch.tensor([20.0])}  # norm 20
    c = {"x": torch.tensor([0.0]), "y": torch.tensor([1.0])}  # norm 1
    clipped = clip_to_median_norm([a, b, c])
    torch.testing.assert_close(clipped[1]["y"], torch.tensor([5.0]))


def test_aggregate_clips_then_applies_the_rule() -> None:
    updates = [_u(3.0, 4.0), _u(0.6, 0.8), _u(60.0, 80.0)]
    out = aggregate(updates, [1.0, 1.0, 1.0], AggregationConfig(rule="mean"))
    torch.testing.assert_close(out["w"], torch.tensor([2.2, 2.9333333]))
    unclipped = aggregate(updates, None, AggregationConfig(clip_to_median_norm=False))
    torch.testing.assert_close(unclipped["w"], torch.tensor([21.2, 28.2666667]))


@pytest.mark.parametrize("rule", sorted(AGGREGATORS))
def test_every_rule_returns_the_common_value_when_all_agree(rule: str) -> None:
    same = [_u(1.0, -2.0, 0.5)] * 4
    out = aggregate(same, [1.0, 2.0, 3.0, 4.0], AggregationConfig(rule=rule))
    torch.testing.assert_close(out["w"], torch.tensor([1.0, -2.0, 0.5]))


def test_rule_names_match_the_config() -> None:
    assert set(typing.get_args(AggregationRule)) == set(AGGREGATORS)


def test_bad_weights_are_rejected() -> None:
    with pytest.raises(ValueError):
        weighted_mean([_u(1.0)], [0.0])
    with pytest.raises(ValueError):
        weighted_mean([_u(1.0), _u(2.0)], [1.0, -1.0])
    with pytest.raises(ValueError):
        weighted_mean([_u(1.0)], [float("nan")])
    with pytest.raises(ValueError):
        weighted_mean([], None)
