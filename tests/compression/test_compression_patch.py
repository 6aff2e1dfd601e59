"""The model patch is lossless, checked by sha256, and small when few values change."""

import pytest
import torch

from subnet.compression import PatchError, apply_patch, encode_patch, payload_nbytes, state_digest


def _state(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "emb": torch.randn(300, 32, generator=gen),
        "norm": torch.ones(32),
        "half": torch.randn(64, generator=gen).to(torch.bfloat16),
        "steps": torch.tensor([3], dtype=torch.int64),
    }


def _sparse_step(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    new = {k: v.clone() for k, v in state.items()}
    new["emb"][7, 3] -= 1e-3
    new["emb"][299, 31] += 0.5
    new["norm"][::4] *= 1.01
    new["half"][0] = -new["half"][0]
    new["steps"] += 1
    return new


def test_round_trip_is_bit_exact() -> None:
    base = _state()
    target = _sparse_step(base)
    out = apply_patch(base, encode_patch(base, target))
    for name in target:
        assert out[name].dtype == target[name].dtype
        assert torch.equal(
            out[name].view(-1).view(torch.uint8), target[name].view(-1).view(torch.uint8)
        )
    assert state_digest(out) == state_digest(target)


def test_dense_change_round_trips_too() -> None:
    base, target = _state(0), _state(1)
    out = apply_patch(base, encode_patch(base, target))
    assert state_digest(out) == state_digest(target)


def test_sparse_patch_is_small() -> None:
    base = _state()
    patch = encode_patch(base, _sparse_step(base))
    assert payload_nbytes(patch) < 250  # vs ~39 KB for the state itself


def test_wrong_base_is_rejected() -> None:
    base = _state()
    patch = encode_patch(base, _sparse_step(base))
    with pytest.raises(PatchError) as err:
        apply_patch(_state(5), patch)
    assert err.value.reason == "base_mismatch"


def test_tampered_target_hash_is_rejected() -> None:
    base = _state()
    patch = encode_patch(base, _sparse_step(base))
    bad = patch["target_sha256"].clone()
    bad[0] ^= 1
    with pytest.raises(PatchError) as err:
        apply_patch(base, {**patch, "target_sha256": bad})
    assert err.value.reason == "hash_mismatch"


def test_counts_that_do_not_fit_are_rejected_before_inflating() -> None:
    base = _state()
    patch = encode_patch(base, _sparse_step(base))
    counts = patch["counts"].clone()
    counts[0] += 1
    with pytest.raises(PatchError) as err:
        apply_patch(base, {**patch, "counts": counts})
    assert err.value.reason == "shape_mismatch"


def test_digest_sees_every_bit_and_every_name() -> None:
    state = _state()
    flipped = {k: v.clone() for k, v in state.items()}
    flipped["emb"].view(torch.int32)[0, 0] ^= 1
    assert state_digest(flipped) != state_digest(state)
    renamed = {("x" if k == "norm" else k): v for k, v in state.items()}
    assert state_digest(renamed) != state_digest(state)
