"""Bit packing: exact round trips and the documented byte layout."""

import pytest
import torch

from subnet.compression.packing import (
    pack_2bit,
    pack_12bit,
    packed_2bit_len,
    packed_12bit_len,
    unpack_2bit,
    unpack_12bit,
)


@pytest.mark.parametrize("count", [0, 1, 2, 3, 64, 1001])
def test_12bit_round_trip_is_exact(count: int) -> None:
    values = torch.randint(0, 4096, (count,), generator=torch.Generator().manual_seed(count))
    packed = pack_12bit(values)
    assert packed.dtype == torch.uint8 and packed.numel() == packed_12bit_len(count)
    assert torch.equal(unpack_12bit(packed, count), values)


def test_12bit_known_layout() -> None:
    packed = pack_12bit(torch.tensor([0xABC, 0x123, 0xFFF]))
    assert packed.tolist() == [0xBC, 0x3A, 0x12, 0xFF, 0x0F]


@pytest.mark.parametrize("count", [0, 1, 3, 4, 5, 1003])
def test_2bit_round_trip_is_exact(count: int) -> None:
    codes = torch.randint(0, 4, (count,), generator=torch.Generator().manual_seed(count))
    packed = pack_2bit(codes)
    assert packed.dtype == torch.uint8 and packed.numel() == packed_2bit_len(count)
    assert torch.equal(unpack_2bit(packed, count), codes)


def test_2bit_known_layout() -> None:
    assert pack_2bit(torch.tensor([1, 2, 3, 0, 3])).tolist() == [1 | 2 << 2 | 3 << 4, 3]


def test_packers_reject_out_of_range_and_wrong_lengths() -> None:
    with pytest.raises(ValueError):
        pack_12bit(torch.tensor([4096]))
    with pytest.raises(ValueError):
        pack_2bit(torch.tensor([4]))
    with pytest.raises(ValueError):
        unpack_12bit(torch.zeros(4, dtype=torch.uint8), 2)
    with pytest.raises(ValueError):
        unpack_2bit(torch.zeros(2, dtype=torch.uint8), 4)
