"""Error bounds for the lossy codecs and exactness for dense fp32."""

import pytest
import torch

from subnet.compression import COMPRESSORS, CompressionConfig, build_compressor
from subnet.compression.chunking import ChunkLayout
from subnet.compression.dense import DenseCompressor
from subnet.compression.int8 import Int8Compressor
from subnet.compression.packing import pack_12bit, unpack_12bit
from subnet.compression.sparseloco import SparseLoCoCompressor, quantize_2bit

GEN = torch.Generator().manual_seed(7)


def _heavy_tailed(*shape: int) -> torch.Tensor:
    """Student-t-like values: pseudo-gradients have heavy tails, which stress absmax and top-k."""
    return torch.randn(shape, generator=GEN) / torch.rand(shape, generator=GEN).clamp(min=0.05)


def test_dense_fp32_is_bit_exact() -> None:
    x = {"w": _heavy_tailed(33, 17)}
    comp = DenseCompressor(torch.float32)
    out = comp.decode(comp.encode(x), {"w": (33, 17)})
    assert torch.equal(out["w"], x["w"])


def test_dense_bf16_relative_error_is_at_most_2_to_minus_8() -> None:
    x = _heavy_tailed(4096)
    comp = DenseCompressor(torch.bfloat16)
    out = comp.decode(comp.encode({"x": x}), {"x": (4096,)})["x"]
    assert ((out - x).abs() <= x.abs() * 2**-8).all()


def test_int8_error_is_half_a_step_per_block() -> None:
    x = _heavy_tailed(1000)  # not a multiple of the block: exercises the padded last block
    comp = Int8Compressor(block=64)
    out = comp.decode(comp.encode({"x": x}), {"x": (1000,)})["x"]
    for start in range(0, 1000, 64):
        block, rec = x[start : start + 64], out[start : start + 64]
        step = block.abs().max() / 127
        assert (rec - block).abs().max() <= step / 2 + 1e-6 * step


def test_int8_encodes_an_all_zero_block_exactly() -> None:
    comp = Int8Compressor(block=4)
    x = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, -2.0])
    assert torch.equal(comp.decode(comp.encode({"x": x}), {"x": (6,)})["x"][:4], torch.zeros(4))


@pytest.mark.parametrize("shape", [(128, 192), (200, 96), (96,), (5000,)])
def test_sparseloco_keeps_exactly_the_top_k_of_each_chunk(shape: tuple[int, ...]) -> None:
    comp = SparseLoCoCompressor(topk=16, chunk=32)
    x = _heavy_tailed(*shape)
    out = comp.decode(comp.encode({"x": x}), {"x": shape})["x"]
    layout = ChunkLayout.of(shape, 32)
    k_full, k_tail = layout.kept(16)
    x_full, x_tail = layout.split(x)
    out_full, out_tail = layout.split(out)
    for chunk, rec, k in [(x_full, out_full, k_full), (x_tail[None], out_tail[None], k_tail)]:
        if chunk.numel() == 0:
            continue
        expected = torch.zeros_like(chunk, dtype=torch.bool)
        expected.scatter_(1, chunk.abs().topk(k, dim=1).indices, True)
        assert torch.equal(rec != 0, expected)
    assert int((out != 0).sum()) == layout.total_kept(16)


def test_sparseloco_layout_rules() -> None:
    assert ChunkLayout.of((256, 1024), 64) == ChunkLayout((256, 1024), 64, True, 64, 4096, 0)
    emb = ChunkLayout.of((50000, 256), 64)
    assert not emb.blocked and emb.full == 3125 and emb.tail == 0
    norm = ChunkLayout.of((256,), 64)
    assert (norm.full, norm.tail, norm.kept(64)) == (0, 256, (64, 4))
    x = torch.arange(128 * 192.0).reshape(128, 192)
    layout = ChunkLayout.of((128, 192), 64)
    full, tail = layout.split(x)
    assert torch.equal(full[1].reshape(64, 64), x[:64, 64:128])  # block grid is row-major
    assert torch.equal(layout.join(full, tail), x)


def test_sparseloco_values_keep_sign_and_stay_inside_their_bin() -> None:
    values = _heavy_tailed(5000)
    codebook, codes = quantize_2bit(values)
    decoded = codebook[codes]
    assert torch.equal(torch.sign(decoded), torch.sign(values))
    for code in range(4):
        members = values[codes == code]
        assert members.numel() > 0
        assert members.min() <= codebook[code] <= members.max()
        assert (decoded[codes == code] - members).abs().max() <= members.max() - members.min()
    # The magnitude split is at the median, so the inner and outer bins hold half each.
    assert abs(int((codes == 0).sum() + (codes == 3).sum()) - 2500) <= 1


def test_sparseloco_costs_14_bits_per_kept_value() -> None:
    comp = SparseLoCoCompressor()  # k=64 of 4096: the SparseLoCo default
    payload = comp.encode({"w": torch.randn(256, 1024)})
    kept = 64 * 64
    assert payload["w::idx"].numel() == kept * 12 // 8
    assert payload["w::val"].numel() == kept * 2 // 8


def _repack(payload: dict, mutate) -> dict:
    count = ChunkLayout.of((100,), 8).total_kept(4)
    idx = unpack_12bit(payload["x::idx"], count)
    return {**payload, "x::idx": pack_12bit(mutate(idx.clone()))}


def test_sparseloco_validate_rejects_bad_indices() -> None:
    comp = SparseLoCoCompressor(topk=4, chunk=8)
    shapes = {"x": (100,)}  # one full chunk of 64 and a tail of 36 (keeps 3)
    payload = comp.encode({"x": torch.randn(100)})
    assert comp.validate(payload, shapes) is None

    def tail_out_of_range(idx: torch.Tensor) -> torch.Tensor:
        idx[-1] = 40  # the tail holds 36 values
        return idx

    def unsorted(idx: torch.Tensor) -> torch.Tensor:
        idx[0], idx[1] = idx[1].item(), idx[0].item()
        return idx

    def duplicate(idx: torch.Tensor) -> torch.Tensor:
        idx[1] = idx[0]
        return idx

    assert comp.validate(_repack(payload, tail_out_of_range), shapes) == "index_out_of_range"
    assert comp.validate(_repack(payload, unsorted), shapes) == "unsorted_index"
    assert comp.validate(_repack(payload, duplicate), shapes) == "unsorted_index"


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_measure_is_the_support_and_the_norm(name: str) -> None:
    """A validator screens every upload by ``measure``: for every codec it says what ``support``
    and ``norm`` say (one parse where the codec has one); a blocked and a flat tensor."""
    shapes = {"w": (128, 64), "b": (300,)}
    comp = build_compressor(CompressionConfig(name=name, topk=8, chunk=16))
    payload = comp.encode({n: _heavy_tailed(*s) for n, s in shapes.items()})
    support, norm = comp.measure(payload, shapes)
    want = comp.support(payload, shapes)
    assert (support is None) == (want is None)
    assert want is None or (support == want).all()
    assert norm == comp.norm(payload, shapes)
