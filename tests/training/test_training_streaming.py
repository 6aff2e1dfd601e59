"""Streaming aggregation: the same answer as the eager rules, one decoded update at a time."""

import pytest
import torch

from subnet.compression import CompressionConfig, build_compressor
from subnet.training import AGGREGATORS, AggregationConfig, aggregate, aggregate_stream
from subnet.training.streaming import merge_payloads


class _Update(dict):
    """A dict that can be weakly referenced, so the test can count live decoded updates."""

    __hash__ = object.__hash__
    __eq__ = object.__eq__


def _updates(n: int, seed: int = 0) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        u = {
            "a": torch.randn(6, 5, generator=gen) * (1 + 3 * i),
            "b": torch.randn(7, generator=gen),
        }
        u["a"][torch.rand(6, 5, generator=gen) < 0.5] = 0.0  # sparse, as top-k updates are
        out.append(u)
    return out


class _Sources:
    """Decode-on-call sources that record how many decoded updates are alive at each call."""

    def __init__(self, updates: list[dict[str, torch.Tensor]]) -> None:
        import weakref

        self.updates, self.live, self.calls, self.max_live = updates, weakref.WeakSet(), 0, 0

    def make(self, i: int):
        def source() -> _Update:
            self.calls += 1
            self.max_live = max(self.max_live, len(self.live))
            out = _Update({k: v.clone() for k, v in self.updates[i].items()})
            self.live.add(out)
            return out

        return source

    def all(self) -> list:
        return [self.make(i) for i in range(len(self.updates))]


@pytest.mark.parametrize("rule", sorted(AGGREGATORS))
@pytest.mark.parametrize("clip", [True, False])
def test_stream_equals_eager_bit_for_bit(rule: str, clip: bool) -> None:
    updates = _updates(5)
    weights = [1.0, 2.0, 0.5, 3.0, 1.5]
    cfg = AggregationConfig(rule=rule, clip_to_median_norm=clip)
    want = aggregate(updates, weights, cfg)
    got = aggregate_stream(_Sources(updates).all(), weights, cfg)
    assert set(got) == set(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("rule", ["mean", "sparse_mean"])
def test_stream_holds_one_decoded_update_and_decodes_once_given_norms(rule: str) -> None:
    updates = _updates(6, seed=1)
    cfg = AggregationConfig(rule=rule)
    sources = _Sources(updates)
    norms = [sum(float(t.pow(2).sum()) for t in u.values()) ** 0.5 for u in updates]
    aggregate_stream(sources.all(), None, cfg, norms=norms)
    assert sources.calls == 6  # one pass: the norms were given
    assert sources.max_live == 0  # the previous update is gone before the next is decoded
    two_pass = _Sources(updates)
    aggregate_stream(two_pass.all(), None, cfg)
    assert two_pass.calls == 12 and two_pass.max_live == 0


def test_stream_rejects_bad_weights_like_the_eager_rules() -> None:
    with pytest.raises(ValueError):
        aggregate_stream([], None)
    with pytest.raises(ValueError):
        aggregate_stream(_Sources(_updates(2)).all(), [1.0, -1.0])


@pytest.mark.parametrize("name", ["sparseloco", "sparseloco-rice", "int8", "dense-fp32"])
def test_merge_payloads_matches_aggregate_of_decoded(name: str) -> None:
    compressor = build_compressor(CompressionConfig(name=name, topk=8, chunk=4))
    shapes = {"a": (6, 5), "b": (7,)}
    payloads = [compressor.encode(u) for u in _updates(4, seed=2)]
    decoded = [compressor.decode(p, shapes) for p in payloads]
    weights = [1.0, 2.0, 3.0, 4.0]
    cfg = AggregationConfig()
    want = aggregate(decoded, weights, cfg)
    got = merge_payloads(compressor, payloads, shapes, weights, cfg)
    # Norms come from the payload (in float64), so clipping factors may differ in the last bit.
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["sparseloco", "sparseloco-rice"])
@pytest.mark.parametrize("rule", ["mean", "sparse_mean"])
def test_sparse_add_into_is_bit_identical_to_adding_the_dense_decode(name: str, rule: str) -> None:
    """Blocked (8 x 12 in 4 x 4 blocks), flat with a tail, and 1-D tensors."""
    compressor = build_compressor(CompressionConfig(name=name, topk=5, chunk=4))
    shapes = {"blocked": (8, 12), "flat": (5, 7), "vec": (3,)}
    gen = torch.Generator().manual_seed(4)
    payloads = [
        compressor.encode({k: torch.randn(s, generator=gen) for k, s in shapes.items()})
        for _ in range(3)
    ]
    decoded = [compressor.decode(p, shapes) for p in payloads]
    cfg = AggregationConfig(rule=rule, clip_to_median_norm=False)
    want = aggregate(decoded, [1.0, 2.0, 0.5], cfg)
    got = merge_payloads(compressor, payloads, shapes, [1.0, 2.0, 0.5], cfg)
    assert all(torch.equal(got[k], want[k]) for k in shapes)
