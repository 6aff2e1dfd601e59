"""`agreement`: honest encodings of nearby inputs pass, with flips only at near-ties; liars fail."""

from __future__ import annotations

import math

import pytest
import torch

from subnet.compression import CompressionConfig, build_compressor
from subnet.compression.agreement import agreement, selections
from subnet.compression.packing import pack_2bit, pack_12bit, unpack_2bit, unpack_12bit
from subnet.compression.sparseloco import SparseLoCoCompressor

RTOL = 1e-4
# A 2-D tensor cut into 8x8 blocks, a 1-D one with a tail, and one shorter than a chunk.
SHAPES = {"w": (16, 16), "b": (70,), "n": (5,)}
CODECS = ["sparseloco", "sparseloco-rice"]


def _codec(name: str):
    return build_compressor(CompressionConfig(name=name, topk=8, chunk=8))


def _input(seed: int = 0) -> dict[str, torch.Tensor]:
    """Heavy-tailed values, as pseudo-gradients are."""
    gen = torch.Generator().manual_seed(seed)
    return {
        name: torch.randn(shape, generator=gen) / torch.rand(shape, generator=gen).clamp(min=0.05)
        for name, shape in SHAPES.items()
    }


def _norm(tensors: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(t.double().pow(2).sum()) for t in tensors.values()))


def _kept(a: torch.Tensor) -> torch.Tensor:
    """Flat positions the codec keeps in ``a``, by magnitude, ascending."""
    codec = SparseLoCoCompressor(topk=8, chunk=8)
    layout = codec.layout(tuple(a.shape))
    positions = layout.flat_positions(codec.select(a)[0], layout.kept(8)[0])
    return positions[a.reshape(-1)[positions].abs().argsort()]


def _set_magnitude(t: torch.Tensor, position: int, magnitude: float) -> None:
    flat = t.view(-1)
    flat[position] = math.copysign(magnitude, float(flat[position]))


def _with_near_ties(a: dict[str, torch.Tensor], gap: float) -> dict[str, torch.Tensor]:
    """``a`` with two near-ties ``gap`` wide in ``w``: the first 8x8 block's 8th and 9th
    magnitudes, and the tensor's median kept magnitude and the next one up."""
    a = {k: v.clone() for k, v in a.items()}
    w = a["w"]
    block = torch.zeros_like(w, dtype=torch.bool)
    block[:8, :8] = True
    order = (w.abs() * block).reshape(-1).argsort(descending=True)
    _set_magnitude(w, int(order[8]), float(w.view(-1)[order[7]].abs()) - gap)
    kept = _kept(w)
    mid = (kept.numel() - 1) // 2  # the (lower) median, the quantization threshold
    _set_magnitude(w, int(kept[mid + 1]), float(w.view(-1)[kept[mid]].abs()) + gap)
    return a


def _gap(a: dict[str, torch.Tensor]) -> float:
    """A near-tie: far below the budget, far above fp32 rounding of these values."""
    return 1e-3 * RTOL * _norm(a)


@pytest.mark.parametrize("name", CODECS)
def test_the_reference_s_own_encoding_agrees_exactly(name: str) -> None:
    codec, a = _codec(name), _input()
    got = agreement(codec, codec.encode(a), a, RTOL)
    assert got.ok, got
    assert (got.distance, got.decoded_gap, got.support_flips, got.code_flips) == (0, 0, 0, 0)
    assert got.budget == pytest.approx(RTOL * _norm(a))


@pytest.mark.parametrize("name", CODECS)
@pytest.mark.parametrize("seed", range(5))
def test_an_honest_encoding_of_a_nearby_input_agrees(name: str, seed: int) -> None:
    codec, a = _codec(name), _input(seed)
    a = _with_near_ties(a, _gap(a))
    gen = torch.Generator().manual_seed(100 + seed)
    noise = {k: torch.randn(v.shape, generator=gen) for k, v in a.items()}
    scale = 0.9 * RTOL * _norm(a) / _norm(noise)
    b = {k: a[k] + scale * noise[k] for k in a}
    got = agreement(codec, codec.encode(b), a, RTOL)
    assert got.ok, got
    assert got.distance <= got.budget and got.decoded_gap <= got.allowance


@pytest.mark.parametrize("name", CODECS)
def test_flips_at_near_ties_agree_and_are_counted(name: str) -> None:
    codec, a = _codec(name), _input()
    gap = _gap(a)
    a = _with_near_ties(a, gap)
    b = {k: v.clone() for k, v in a.items()}
    w = b["w"]
    block = torch.zeros_like(w, dtype=torch.bool)
    block[:8, :8] = True
    order = (w.abs() * block).reshape(-1).argsort(descending=True)
    _set_magnitude(w, int(order[8]), float(w.view(-1)[order[7]].abs()) + gap)  # 9th beats 8th
    kept = _kept(w)
    mid = (kept.numel() - 1) // 2
    _set_magnitude(w, int(kept[mid]), float(w.view(-1)[kept[mid + 1]].abs()) + gap)
    assert _norm({k: b[k] - a[k] for k in a}) < 0.1 * RTOL * _norm(a)
    got = agreement(codec, codec.encode(b), a, RTOL)
    assert got.ok, got
    assert got.support_flips == 1 and got.code_flips >= 1
    assert 0 < got.decoded_gap <= got.allowance


def _parts(payload: dict, name: str, layout_total: int) -> tuple[torch.Tensor, torch.Tensor]:
    return unpack_12bit(payload[f"{name}::idx"], layout_total), unpack_2bit(
        payload[f"{name}::val"], layout_total
    )


def _lie(a: dict[str, torch.Tensor], how: str) -> dict[str, torch.Tensor]:
    """An encoding of ``a`` (plain sparseloco) altered in one way a lazy or lying miner might."""
    codec = SparseLoCoCompressor(topk=8, chunk=8)
    payload = codec.encode(a)
    total = codec.layout(SHAPES["w"]).total_kept(8)
    idx, codes = _parts(payload, "w", total)
    block = codec.layout(SHAPES["w"]).split(a["w"])[0][0]
    if how == "support":  # send the block's smallest value instead of its largest
        first = idx[:8].tolist()
        first[first.index(int(block.abs().argmax()))] = int(block.abs().argmin())
        order = sorted(range(8), key=lambda i: first[i])
        idx[:8] = torch.tensor([first[i] for i in order])
        codes[:8] = codes[:8][torch.tensor(order)]
    elif how == "sign":  # one big positive value sent as big negative
        i = int((codes == 3).nonzero()[0])
        codes[i] = 0
    elif how == "magnitude":  # the largest big value and the smallest small one trade codes
        values = a["w"].reshape(-1)[selections(codec, payload, SHAPES)["w"].positions]
        big = ((codes == 0) | (codes == 3)).nonzero().reshape(-1)
        small = ((codes == 1) | (codes == 2)).nonzero().reshape(-1)
        i = int(big[values[big].abs().argmax()])
        j = int(small[values[small].abs().argmin()])
        codes[i], codes[j] = (1 if codes[i] == 0 else 2), (0 if codes[j] == 1 else 3)
    elif how == "too_many_big":
        codes[:] = torch.where(codes <= 1, 0, 3)
    elif how == "codebook":
        payload["w::cb"] = payload["w::cb"] * 1.01
    payload["w::idx"], payload["w::val"] = pack_12bit(idx), pack_2bit(codes)
    return payload


@pytest.mark.parametrize("how", ["support", "sign", "magnitude", "too_many_big", "codebook"])
def test_a_payload_no_nearby_input_explains_fails_with_its_reason(how: str) -> None:
    a = _input()
    codec = SparseLoCoCompressor(topk=8, chunk=8)
    got = agreement(codec, _lie(a, how), a, RTOL)
    assert not got.ok
    assert got.reason == ("magnitude" if how == "too_many_big" else how), got
    assert got.distance > got.budget


def test_a_malformed_payload_fails_with_the_codec_s_reason() -> None:
    codec, a = _codec("sparseloco-rice"), _input()
    payload = codec.encode(a)
    del payload["cb"]
    got = agreement(codec, payload, a, RTOL)
    assert (got.ok, got.reason) == (False, "missing_tensor")


def test_the_two_sparseloco_formats_give_the_same_verdict() -> None:
    a, plain, rice = _input(), _codec("sparseloco"), _codec("sparseloco-rice")
    b = {k: v * (1 + 3e-5) for k, v in a.items()}
    one, two = agreement(plain, plain.encode(b), a, RTOL), agreement(rice, rice.encode(b), a, RTOL)
    assert one == two


def test_dense_codecs_are_not_compared_this_way() -> None:
    with pytest.raises(TypeError, match="SparseLoCo"):
        agreement(_codec_named("int8"), {}, _input(), RTOL)


def _codec_named(name: str):
    return build_compressor(CompressionConfig(name=name))
