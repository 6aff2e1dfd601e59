"""Commitment strings <-> pallet fields, within 3 fields of 128 bytes."""

from __future__ import annotations

import pytest

from subnet.chain.commitments import CommitmentTooLarge, from_fields, to_fields


@pytest.mark.parametrize("text", ["x", "a" * 128, "b" * 129, "é" * 192, "c" * 384])
def test_round_trip(text):
    fields = to_fields(text)
    assert 1 <= len(fields) <= 3
    for field in fields:
        ((variant, value),) = field.items()
        size = len(bytes.fromhex(value[2:]))
        assert variant == f"Raw{size}" and size <= 128
    assert from_fields(fields) == text


@pytest.mark.parametrize("text", ["", "d" * 385])
def test_out_of_limits(text):
    with pytest.raises(CommitmentTooLarge):
        to_fields(text)
