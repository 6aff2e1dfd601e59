"""Read settings survive the chain commitment exactly, within the pallet's limits."""

from __future__ import annotations

import pytest

from subnet.chain.commitments import MAX_FIELD_BYTES, MAX_FIELDS, from_fields, to_fields
from subnet.storage.commitment import (
    CommitmentError,
    ReadSettings,
    decode_commitment,
    encode_commitment,
)

R2_ACCOUNT = "0123456789abcdef0123456789abcdef"
CASES = {
    "aws": ReadSettings(
        "beam-miner-1",
        None,
        "eu-west-1",
        "beam/",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "r2": ReadSettings(
        "beam-miner-2",
        f"https://{R2_ACCOUNT}.r2.cloudflarestorage.com",
        "auto",
        "",
        "a" * 32,
        "b" * 64,
    ),
    "anonymous": ReadSettings("public-bucket", "https://s3.example.org:9000", "us-east-1"),
    "local": ReadSettings("beam", "http://127.0.0.1:5000", "us-east-1", "rooms/x/", "k", "s"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_within_pallet_limits(name: str) -> None:
    settings = CASES[name]
    text = encode_commitment(settings)
    assert decode_commitment(text) == settings
    fields = to_fields(text)  # what the chain layer commits: at most 3 Raw fields of 128 bytes
    assert 1 <= len(fields) <= MAX_FIELDS
    assert from_fields(fields) == text  # the SDK concatenates Raw fields when reading


def test_r2_endpoint_is_compressed() -> None:
    text = encode_commitment(CASES["r2"])
    assert f"|r2:{R2_ACCOUNT}|" in text
    assert len(text.encode()) <= 2 * MAX_FIELD_BYTES


def test_longest_legal_settings_fit() -> None:
    settings = ReadSettings(
        "b" * 63,
        f"https://{R2_ACCOUNT}.r2.cloudflarestorage.com",
        "a" * 32,
        "p" * 64,
        "k" * 32,
        "s" * 64,
    )
    assert len(to_fields(encode_commitment(settings))) == MAX_FIELDS


def test_too_long_is_refused() -> None:
    settings = ReadSettings(
        "b" * 63, "https://" + "h" * 200 + ".example", "auto", "", "k" * 128, "s" * 128
    )
    with pytest.raises(CommitmentError, match="limit"):
        encode_commitment(settings)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "b2|aws|us-east-1|bucket||k|s",  # another format version
        "b1|aws|us-east-1|bucket||k",  # missing a part
        "b1|ftp://host|us-east-1|bucket|||",  # not http(s)
        "b1|https://user:pw@host|us-east-1|bucket|||",  # credentials in the URL
        "b1|r2:XYZ|auto|bucket|||",  # bad R2 account id
        "b1|aws|us-east-1|Bad_Bucket|||",
        "b1|aws|us-east-1|bucket|../escape|k|s",
        "b1|aws|us-east-1|bucket||key-without-secret|",
        "b1|aws|us-east-1|bucket||k|s p a c e",
        "b1|aws|" + "x" * 400,
    ],
)
def test_malformed_commitments_are_refused(text: str) -> None:
    with pytest.raises(CommitmentError):
        decode_commitment(text)
