"""Helpers shared by the room tests: named keys and read settings."""

from __future__ import annotations

from bittensor.sp_core import Keypair

from subnet.storage.commitment import ReadSettings, encode_commitment


def key(name: str) -> Keypair:
    """A deterministic keypair per name."""
    return Keypair.create_from_uri(f"//{name}")


def read_of(bucket: str, endpoint: str = "http://127.0.0.1:9") -> str:
    """A storage commitment string for ``bucket``."""
    return encode_commitment(ReadSettings(bucket=bucket, endpoint_url=endpoint))
