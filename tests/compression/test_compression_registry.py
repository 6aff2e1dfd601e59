"""Every registered compressor round-trips through safetensors and validates its own payloads."""

import typing

import pytest
import torch
from safetensors.torch import load, save

from subnet.compression import (
    COMPRESSORS,
    CompressionConfig,
    PayloadError,
    build_compressor,
    payload_nbytes,
    validate_payload,
)
from subnet.compression.config import CompressorName

SHAPES = {
    "emb.weight": (200, 96),  # rows not a multiple of 64: flat chunks with a tail
    "attn.weight": (128, 64),  # 64x64 blocks
    "norm.weight": (96,),  # 1-D, shorter than one chunk
    "odd": (3, 5, 7),
}


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}


def test_config_names_match_the_registry() -> None:
    assert set(typing.get_args(CompressorName)) == set(COMPRESSORS)


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_round_trip_through_safetensors(name: str) -> None:
    cfg = CompressionConfig(name=name)
    compressor = build_compressor(cfg)
    assert compressor.info.name == name
    tensors = _tensors()
    payload = compressor.encode(tensors)
    assert all(isinstance(t, torch.Tensor) and t.dim() == 1 for t in payload.values())
    wire = load(save(payload))
    assert validate_payload(wire, SHAPES, cfg) is None
    decoded = compressor.decode(wire, SHAPES)
    assert set(decoded) == set(SHAPES)
    for key, shape in SHAPES.items():
        assert decoded[key].shape == shape and decoded[key].dtype == torch.float32
        assert torch.isfinite(decoded[key]).all()
    if compressor.info.lossless:
        assert all(torch.equal(decoded[k], tensors[k]) for k in SHAPES)
    assert payload_nbytes(payload) <= payload_nbytes(
        build_compressor(CompressionConfig(name="dense-fp32")).encode(tensors)
    )


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_structural_faults_are_rejected_with_reasons(name: str) -> None:
    compressor = build_compressor(CompressionConfig(name=name))
    payload = compressor.encode(_tensors())
    first = sorted(payload)[0]

    missing = dict(payload)
    del missing[first]
    assert compressor.validate(missing, SHAPES) == "missing_tensor"
    assert (
        compressor.validate({**payload, "extra::v": torch.zeros(1)}, SHAPES) == "unexpected_tensor"
    )
    wrong_dtype = {**payload, first: payload[first].to(torch.float64)}
    assert compressor.validate(wrong_dtype, SHAPES) == "dtype_mismatch"
    short = {**payload, first: payload[first][:-1]}
    assert compressor.validate(short, SHAPES) == "shape_mismatch"
    with pytest.raises(PayloadError) as err:
        compressor.decode(short, SHAPES)
    assert err.value.reason == "shape_mismatch"


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_non_finite_values_are_rejected(name: str) -> None:
    compressor = build_compressor(CompressionConfig(name=name))
    payload = compressor.encode(_tensors())
    key = next(k for k, t in sorted(payload.items()) if t.is_floating_point())
    poisoned = payload[key].clone()
    poisoned[0] = float("nan")
    assert compressor.validate({**payload, key: poisoned}, SHAPES) == "non_finite"


def test_config_forbids_unknown_keys() -> None:
    with pytest.raises(ValueError):
        CompressionConfig(name="sparseloco", top_k=3)
    with pytest.raises(ValueError):
        CompressionConfig(chunk=128)  # 128*128 indices would not fit in 12 bits


def test_every_codec_declares_what_a_check_of_it_verifies():
    # The checker calls the codec's declaration (``CompressorInfo.check``), never its name: a
    # new codec must state its rules to be built at all, so it cannot get a weaker check by
    # being named differently.
    from subnet.compression.base import CompressorInfo
    from subnet.compression.config import CompressionConfig
    from subnet.compression.registry import COMPRESSORS, build_compressor

    rules = {
        name: build_compressor(CompressionConfig(name=name)).info.check for name in COMPRESSORS
    }
    assert rules["sparseloco"] == rules["sparseloco-rice"] == "sparse"
    assert rules["dense-fp32"] == "lossless"
    assert set(rules.values()) <= {"sparse", "lossless", "other"}
    with pytest.raises(TypeError):
        CompressorInfo("new-codec", lossless=False, summary="undeclared")  # type: ignore[call-arg]
