"""A commitment string <-> the Commitments pallet's ``Raw`` fields.

The pallet stores at most 3 fields of at most 128 bytes each per hotkey and subnet; a string
up to 384 UTF-8 bytes is split into that many ``RawN`` fields and read back by concatenation
(which is also how the SDK's metagraph renders a commitment).
"""

from __future__ import annotations

from ..storage.commitment import MAX_COMMITMENT_BYTES as MAX_BYTES
from ..storage.commitment import MAX_FIELD_BYTES, MAX_FIELDS, is_beam_commitment
from .errors import ChainSetupError

__all__ = [
    "MAX_BYTES",
    "MAX_FIELDS",
    "MAX_FIELD_BYTES",
    "CommitmentTooLarge",
    "check_overwrite",
    "from_fields",
    "to_fields",
]


class CommitmentTooLarge(ValueError):
    """The string does not fit the pallet's limits."""


def to_fields(text: str) -> list[dict[str, str]]:
    """Split ``text`` into ``[{"RawN": "0x.."}]`` fields within the pallet's limits."""
    data = text.encode("utf-8")
    if not data:
        raise CommitmentTooLarge("an empty commitment says nothing; commit at least one byte")
    if len(data) > MAX_BYTES:
        raise CommitmentTooLarge(
            f"commitment is {len(data)} bytes; the chain allows {MAX_FIELDS} fields of "
            f"{MAX_FIELD_BYTES} bytes ({MAX_BYTES} in all)"
        )
    chunks = [data[i : i + MAX_FIELD_BYTES] for i in range(0, len(data), MAX_FIELD_BYTES)]
    return [{f"Raw{len(chunk)}": "0x" + chunk.hex()} for chunk in chunks]


def from_fields(fields: list) -> str:
    """Join ``Raw`` fields back into the committed string (other variants are ignored)."""
    data = b""
    for entry in fields:
        for variant, value in entry.items() if isinstance(entry, dict) else []:
            if variant.startswith("Raw") and isinstance(value, str):
                data += bytes.fromhex(value.removeprefix("0x"))
    return data.decode("utf-8", errors="replace")


def check_overwrite(current: str | None, hotkey: str, netuid: int, overwrite: bool) -> None:
    """Before a neuron commits on a real network: refuse to replace a commitment that is not
    Beam's (the hotkey is in use by another subnet's software) unless ``overwrite``.

    Raises ChainSetupError with one line naming what would be lost and how to go on.
    """
    if current is None or current == "" or overwrite or is_beam_commitment(current):
        return
    shown = current if len(current) <= 48 else current[:45] + "..."
    raise ChainSetupError(
        f"hotkey {hotkey} already has a commitment on netuid {netuid} that is not Beam's "
        f"({shown!r}); committing this node's bucket would overwrite it. Use a hotkey of its "
        "own for Beam, or pass --neuron.overwrite_commitment to replace it"
    )
