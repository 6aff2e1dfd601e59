"""Known answers for the held-out draw: ids, the pool it draws from, mixed batches."""

from __future__ import annotations

import random

import numpy as np

from subnet.scoring.draws import (
    REPORTED_HELDOUT,
    corpus_batches,
    heldout_draw,
    heldout_id,
    split_of,
)


def test_held_out_ids_are_negative_and_round_trip() -> None:
    assert [heldout_id(j) for j in (0, 1, 31)] == [-1, -2, -32]
    assert split_of(-1) == ("heldout", 0) and split_of(-32) == ("heldout", 31)
    assert split_of(0) == ("train", 0) and split_of(7) == ("train", 7)


def test_the_draw_comes_from_the_reported_set_only() -> None:
    rng = random.Random(3)
    draws = [heldout_draw(16, 1000, rng) for _ in range(50)]
    pool = {heldout_id(j) for j in range(REPORTED_HELDOUT)}
    assert all(len(d) == 16 == len(set(d)) and set(d) <= pool for d in draws)
    assert len({tuple(sorted(d)) for d in draws}) > 1  # not a fixed subset a miner could learn


def test_the_draw_is_all_of_a_small_split_and_empty_when_off() -> None:
    assert heldout_draw(16, 5) == [-1, -2, -3, -4, -5]
    assert heldout_draw(64, 1000) == [heldout_id(j) for j in range(REPORTED_HELDOUT)]
    assert heldout_draw(0, 1000) == [] and heldout_draw(16, 0) == []


class _Splits:
    """Sample ``i`` of a split is ``[base + i] * 3`` (base 100 for train, 900 for held-out)."""

    def sample(self, i: int, split: str = "train") -> np.ndarray:
        return np.full(3, (100 if split == "train" else 900) + i, dtype=np.uint16)


def test_mixed_batches_keep_order_and_split() -> None:
    batches = list(corpus_batches(_Splits(), [4, -1, 0, -3, 2], 2))
    assert [tuple(x.shape) for x, _ in batches] == [(2, 2), (2, 2), (1, 2)]
    firsts = [int(v) for x, _ in batches for v in x[:, 0]]
    assert firsts == [104, 900, 100, 902, 102]
    x, y = batches[0]
    assert x.tolist() == [[104, 104], [900, 900]] and y.tolist() == [[104, 104], [900, 900]]
