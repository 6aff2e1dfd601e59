"""Error feedback keeps, with decay, exactly what the codec did not send."""

import torch

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor

SHAPE = (64, 128)


def _grad(seed: int) -> dict[str, torch.Tensor]:
    return {"w": torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed))}


def test_buffer_is_decayed_residual_plus_what_was_not_sent() -> None:
    compressor = build_compressor(CompressionConfig(name="sparseloco", topk=8))
    ef = ErrorFeedback(decay=0.9)
    g1, g2 = _grad(1), _grad(2)

    _, d1 = ef.compress(compressor, g1)
    assert torch.allclose(ef.buffers["w"], g1["w"] - d1["w"])
    before = ef.buffers["w"].clone()
    payload, d2 = ef.compress(compressor, g2)
    assert torch.allclose(ef.buffers["w"], 0.9 * before + g2["w"] - d2["w"], atol=1e-6)
    # What the sender accounts for is what every reader decodes.
    assert torch.equal(compressor.decode(payload, {"w": SHAPE})["w"], d2["w"])


def test_without_decay_nothing_is_ever_lost() -> None:
    compressor = build_compressor(CompressionConfig(name="sparseloco", topk=8))
    ef = ErrorFeedback(decay=1.0)
    sent = torch.zeros(SHAPE)
    total = torch.zeros(SHAPE)
    for seed in range(5):
        g = _grad(seed)
        total += g["w"]
        sent += ef.compress(compressor, g)[1]["w"]
    assert torch.allclose(sent + ef.buffers["w"], total, atol=1e-5)


def test_the_largest_residuals_are_sent_next_round() -> None:
    compressor = build_compressor(CompressionConfig(name="sparseloco", topk=8))
    ef = ErrorFeedback(decay=1.0)
    ef.compress(compressor, _grad(0))
    zero = {"w": torch.zeros(SHAPE)}
    residual = ef.buffers["w"].clone()
    _, decoded = ef.compress(compressor, zero)
    assert ((decoded["w"] != 0) <= (residual != 0)).all()
    assert int((decoded["w"] != 0).sum()) == 8 * 2  # two 64x64 blocks, top 8 of each


def test_state_dict_resume_reproduces_the_same_payloads() -> None:
    compressor = build_compressor(CompressionConfig(name="int8"))
    a = ErrorFeedback(0.95)
    a.compress(compressor, _grad(0))
    b = ErrorFeedback(0.95)
    b.load_state_dict(a.state_dict())
    pa, _ = a.compress(compressor, _grad(1))
    pb, _ = b.compress(compressor, _grad(1))
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


def test_lossless_codec_leaves_an_empty_residual() -> None:
    ef = ErrorFeedback(0.95)
    ef.compress(build_compressor(CompressionConfig(name="dense-fp32")), _grad(3))
    assert torch.count_nonzero(ef.buffers["w"]) == 0
