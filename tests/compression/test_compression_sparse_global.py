"""`sparse-global-rice`: the model's largest values, as many as `sparseloco-rice` keeps in all."""

import math

import numpy as np
import pytest
import torch

from subnet.compression import CompressionConfig, build_compressor
from subnet.compression.chunking import ChunkLayout

CFG = CompressionConfig(name="sparse-global-rice", topk=8, chunk=16)
SHAPES = {"emb.weight": (40, 24), "attn.weight": (32, 16), "norm.weight": (24,)}


def _tensors() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    out = {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}
    out["emb.weight"][:8] *= 10  # one hot region: a model-wide top-k favours it
    out["norm.weight"].zero_()  # nothing to send here
    return out


def test_it_keeps_the_models_largest_values_as_many_as_sparseloco_keeps() -> None:
    """Known answer: exactly sum(total_kept) values, the largest magnitudes over every tensor,
    each decoded with its own sign; none where the update is zero."""
    tensors = _tensors()
    compressor = build_compressor(CFG)
    decoded = compressor.decode(compressor.encode(tensors), SHAPES)
    budget = sum(ChunkLayout.of(s, 16).total_kept(8) for s in SHAPES.values())
    kept = {n: decoded[n] != 0 for n in SHAPES}
    assert sum(int(m.sum()) for m in kept.values()) == budget
    every = torch.cat([t.reshape(-1).abs() for t in tensors.values()])
    threshold = every.topk(budget).values[-1]
    for name, mask in kept.items():
        assert bool((tensors[name].abs()[mask] >= threshold).all())
        assert bool((tensors[name].abs()[~mask] <= threshold).all())
        assert bool((decoded[name][mask].sign() == tensors[name][mask].sign()).all())
    assert not kept["norm.weight"].any()
    assert int(kept["emb.weight"][:8].sum()) > int(kept["emb.weight"][8:].sum())


def test_support_norm_and_add_into_agree_with_the_decode() -> None:
    compressor = build_compressor(CFG)
    payload = compressor.encode(_tensors())
    decoded = compressor.decode(payload, SHAPES)
    flat = np.concatenate([decoded[n].reshape(-1).numpy() for n in sorted(SHAPES)])
    assert np.array_equal(compressor.support(payload, SHAPES), np.flatnonzero(flat))
    norm = math.sqrt(sum(float(t.double().pow(2).sum()) for t in decoded.values()))
    assert compressor.norm(payload, SHAPES) == pytest.approx(norm, rel=1e-12)
    num: dict[str, torch.Tensor] = {}
    compressor.add_into(payload, SHAPES, num, None, 1.0, 1.0)
    assert all(torch.equal(num[n], decoded[n]) for n in SHAPES)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [("counts_off_budget", "shape_mismatch"), ("count_past_tensor", "invalid_value")],
)
def test_forged_counts_are_rejected(fault: str, reason: str) -> None:
    compressor = build_compressor(CFG)
    payload = compressor.encode(_tensors())
    n = payload["n"].clone()  # sorted names: attn, emb, norm
    if fault == "counts_off_budget":
        n[0] += 1
    else:
        n[2] = 25  # norm.weight holds 24 values
    assert compressor.validate({**payload, "n": n}, SHAPES) == reason


def test_an_index_past_its_tensor_is_rejected() -> None:
    compressor = build_compressor(CFG)
    tensors = {name: torch.zeros(shape) for name, shape in SHAPES.items()}
    budget = compressor.budget(SHAPES)
    tensors["emb.weight"].view(-1)[: budget - 1] = 2.0
    tensors["norm.weight"][-1] = 1.0  # the last kept value: index 23 of 24
    assert compressor.validate(compressor.encode(tensors), SHAPES) is None
    forged = _recode_last_gap(compressor, tensors, bump=5)
    assert compressor.validate(forged, SHAPES) == "index_out_of_range"


def _recode_last_gap(compressor, tensors: dict[str, torch.Tensor], bump: int) -> dict:
    """An encoding of `tensors` whose last gap (norm.weight's only index) is `bump` too large."""
    from subnet.compression import rice
    from subnet.compression.sparseloco_rice import rice_streams

    payload = compressor.encode(tensors)
    ks = payload["rice::k"].tolist()
    counts = payload["n"].tolist()
    shapes = {n: SHAPES[n] for n in sorted(SHAPES)}
    sizes = [math.prod(s) for s in shapes.values()]
    q, r = rice_streams(payload, sizes, counts, ks)
    gaps, offset = [], 0
    for i, c in enumerate(counts):
        gaps.append((q[offset : offset + c] << ks[i]) | r[i])
        offset += c
    gaps[-1] = gaps[-1].copy()
    gaps[-1][-1] += bump
    unary = np.concatenate([rice.unary_bits(g, k) for g, k in zip(gaps, ks, strict=True)])
    rem = np.concatenate([rice.remainder_bits(g, k) for g, k in zip(gaps, ks, strict=True)])
    return {
        **payload,
        "rice::unary": torch.from_numpy(rice.pack(unary)),
        "rice::rem": torch.from_numpy(rice.pack(rem)),
    }
