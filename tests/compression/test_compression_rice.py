"""Rice-coded SparseLoCo: exact round trips over random supports, edge cases, hostile streams."""

import math

import numpy as np
import pytest
import torch
from safetensors.torch import load, save

from subnet.compression import rice
from subnet.compression.sparseloco import SparseLoCoCompressor
from subnet.compression.sparseloco_rice import SparseLoCoRiceCompressor, chunk_gaps

SHAPES = {
    "emb": (200, 96),  # flat chunks with a tail
    "attn": (128, 64),  # 64x64 blocks
    "norm": (96,),  # a lone tail
    "odd": (3, 5, 7),
}


def _random_support(rng: np.random.Generator, size: int, kept: int) -> np.ndarray:
    """A uniformly random ``kept``-subset of ``range(size)``, sorted."""
    return np.sort(rng.choice(size, kept, replace=False))


@pytest.mark.parametrize("seed", range(20))
def test_rice_streams_round_trip_random_gaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 500))
    gaps = rng.geometric(1 / rng.uniform(1, 300), n).astype(np.int64) - 1
    k = rice.best_k(gaps)
    # another tensor's remainders first, so this one's start at an odd bit
    before = rng.integers(0, 8, int(rng.integers(0, 9)))
    bits = np.concatenate([rice.remainder_bits(before, 3), rice.remainder_bits(gaps, k)])
    words = rice.words(rice.pack(bits), bits.size)
    q = rice.quotients(rice.pack(rice.unary_bits(gaps, k)), n)
    assert q is not None and words is not None
    assert np.array_equal((q << k) | rice.fields(words, 3 * before.size, k, n), gaps)


@pytest.mark.parametrize("k", range(rice.MAX_K + 1))
def test_fields_read_every_width_at_every_bit_offset(k: int) -> None:
    values = np.arange(64, dtype=np.int64) * 2654435761 % (1 << k) if k else np.zeros(64, np.int64)
    for lead in range(8):  # the first value at each bit position of a byte
        bits = np.concatenate([np.ones(lead, np.uint8), rice.remainder_bits(values, k)])
        words = rice.words(rice.pack(bits), bits.size)
        assert words is not None
        assert np.array_equal(rice.fields(words, lead, k, values.size), values)


def test_words_refuse_a_stream_of_another_length_or_with_padding_bits_set() -> None:
    packed = rice.pack(np.array([1, 0, 1], np.uint8))  # 3 bits, 5 of padding
    assert rice.words(packed, 3) is not None
    assert rice.words(packed, 11) is None  # two bytes expected
    assert rice.words(packed | np.uint8(1), 3) is None  # a padding bit set


def test_best_k_minimizes_the_coded_length() -> None:
    gaps = np.array([0, 0, 1, 200, 3, 63, 64, 4095], dtype=np.int64)
    costs = [int((gaps >> k).sum()) + gaps.size * (k + 1) for k in range(rice.MAX_K + 1)]
    assert costs[rice.best_k(gaps)] == min(costs)
    assert rice.best_k(np.zeros(10, dtype=np.int64)) == 0


@pytest.mark.parametrize("seed", range(12))
def test_gap_coding_recovers_random_supports_exactly(seed: int) -> None:
    """Per chunk, any sorted support survives gaps -> Rice -> gaps -> indices bit for bit."""
    rng = np.random.default_rng(100 + seed)
    side = int(rng.choice([2, 4, 8, 16, 64]))
    topk = int(rng.integers(1, side * side + 1))
    compressor = SparseLoCoRiceCompressor(topk, side)
    numel = int(rng.integers(1, 5 * side * side))
    x = torch.from_numpy(rng.standard_normal(numel).astype(np.float32))
    payload = compressor.encode({"x": x})
    layout, k_full, _ = compressor._layout((numel,))
    want, _ = compressor.sparse.select(x)
    parsed = compressor.parse(load(save(payload)), {"x": (numel,)})
    assert np.array_equal(parsed["x"].indices, want.numpy())
    gaps = chunk_gaps(want.numpy(), layout, k_full)
    assert (gaps >= 0).all()


@pytest.mark.parametrize("seed", range(8))
def test_decode_equals_sparseloco_bit_for_bit(seed: int) -> None:
    """Same selection, same codebook, same values: only the index coding differs."""
    gen = torch.Generator().manual_seed(seed)
    tensors = {n: torch.randn(s, generator=gen) / torch.rand(s, generator=gen).clamp(min=0.05)
               for n, s in SHAPES.items()}  # fmt: skip
    for topk in (1, 7, 64):
        plain, coded = SparseLoCoCompressor(topk, 64), SparseLoCoRiceCompressor(topk, 64)
        want = plain.decode(plain.encode(tensors), SHAPES)
        payload = load(save(coded.encode(tensors)))
        got = coded.decode(payload, SHAPES)
        assert all(torch.equal(got[n], want[n]) for n in SHAPES)
        assert np.array_equal(
            coded.support(payload, SHAPES), plain.support(plain.encode(tensors), SHAPES)
        )
        assert coded.norm(payload, SHAPES) == pytest.approx(
            math.sqrt(sum(float(t.double().pow(2).sum()) for t in want.values())), rel=1e-12
        )


def test_edge_cases_k1_full_chunk_zero_chunk_and_no_tensors() -> None:
    x = torch.zeros(64, 64)
    x[5, 7] = 3.0
    # k = 1: one index per chunk; an all-zero chunk still sends its (tied) top-1, as SparseLoCo.
    one = SparseLoCoRiceCompressor(1, 8)
    out = one.decode(one.encode({"x": x}), {"x": (64, 64)})["x"]
    assert out[5, 7] > 0 and int((out != 0).sum()) == 1
    # Full chunk: every position kept, every gap zero, the unary stream is all ones.
    full = SparseLoCoRiceCompressor(16, 4)
    y = torch.randn(8, 8)
    payload = full.encode({"y": y})
    assert int(payload["rice::k"][0]) == 0 and int(payload["rice::rem"].numel()) == 0
    assert not bool(full.decode(payload, {"y": (8, 8)})["y"].eq(0).any())
    assert (full.decode(payload, {"y": (8, 8)})["y"].sign() == y.sign()).all()
    # An empty tensor next to a real one: no chunk at all, nothing sent for it.
    mixed = SparseLoCoRiceCompressor(4, 4)
    shapes = {"e": (0,), "w": (3, 5)}
    z = {"e": torch.zeros(0), "w": torch.randn(3, 5)}
    got = mixed.decode(mixed.encode(z), shapes)
    want = SparseLoCoCompressor(4, 4).decode(SparseLoCoCompressor(4, 4).encode(z), shapes)
    assert got["e"].shape == (0,) and torch.equal(got["w"], want["w"])
    # No tensors at all: empty streams, and they decode to nothing.
    empty = SparseLoCoRiceCompressor()
    assert empty.decode(empty.encode({}), {}) == {}
    assert empty.support(empty.encode({}), {}).size == 0


def _payload() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return SparseLoCoRiceCompressor().encode(
        {n: torch.randn(s, generator=gen) for n, s in SHAPES.items()}
    )


def test_hostile_streams_are_rejected_with_reasons() -> None:
    c = SparseLoCoRiceCompressor()
    p = _payload()
    assert c.validate(p, SHAPES) is None
    extra_byte = torch.cat([p["rice::unary"], torch.zeros(1, dtype=torch.uint8)])
    assert c.validate({**p, "rice::unary": extra_byte}, SHAPES) == "shape_mismatch"
    assert c.validate({**p, "rice::unary": p["rice::unary"][:-1]}, SHAPES) == "shape_mismatch"
    huge = torch.zeros(10**6, dtype=torch.uint8)
    assert c.validate({**p, "rice::unary": huge}, SHAPES) == "shape_mismatch"
    assert c.validate({**p, "rice::rem": p["rice::rem"][:-1]}, SHAPES) == "shape_mismatch"
    bad_k = p["rice::k"].clone()
    bad_k[0] = 13
    assert c.validate({**p, "rice::k": bad_k}, SHAPES) == "invalid_value"
    bad_cb = p["cb"].clone()
    bad_cb[2] = float("inf")
    assert c.validate({**p, "cb": bad_cb}, SHAPES) == "non_finite"


def test_padding_and_out_of_range_indices_are_rejected() -> None:
    c = SparseLoCoRiceCompressor(2, 4)  # chunks of 16 values, 2 kept
    shapes = {"x": (16,)}
    x = torch.zeros(16)
    x[5], x[12] = 1.0, -2.0  # gaps 5, 6: k = 2, so 4 remainder bits and 4 padding bits
    p = c.encode({"x": x})
    assert c.validate(p, shapes) is None and int(p["rice::k"][0]) == 2
    gaps = np.array([10, 10], dtype=np.int64)  # indices 10 and 21: past the chunk
    far = {**p, "rice::unary": torch.from_numpy(rice.pack(rice.unary_bits(gaps, 2))),
           "rice::rem": torch.from_numpy(rice.pack(rice.remainder_bits(gaps, 2)))}  # fmt: skip
    assert c.validate(far, shapes) == "index_out_of_range"
    padded = p["rice::rem"].clone()
    padded[-1] |= 1  # a padding bit: same decode, but not the canonical encoding
    assert c.validate({**p, "rice::rem": padded}, shapes) == "invalid_value"
    with pytest.raises(Exception) as err:
        c.decode({**p, "rice::rem": padded}, shapes)
    assert getattr(err.value, "reason", None) == "invalid_value"


def test_smaller_than_12_bit_packing_on_clustered_supports() -> None:
    """Clustered supports (hot rows) are where Rice wins; it never needs more than ~13 bits."""
    x = torch.zeros(4096, 64)
    x[::64] = torch.randn(64, 64)  # one hot row per 64 x 64 block
    plain, coded = SparseLoCoCompressor(64, 64), SparseLoCoRiceCompressor(64, 64)
    size = lambda p: sum(t.numel() * t.element_size() for t in p.values())  # noqa: E731
    assert size(coded.encode({"x": x})) < 0.5 * size(plain.encode({"x": x}))
