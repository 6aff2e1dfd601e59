"""Signed JSON documents: the wire form of every room object (manifest, invite, redemption, leave).

A document is ``{"kind": K, "signer": SS58, "body": {...}, "signature": HEX}``. The signature is
sr25519 over ``DOMAIN + kind + NUL + canonical JSON of body`` (sorted keys, no spaces), so a
signature for one kind never passes for another and re-serialising the body cannot change what was
signed. Parsing is total: anything else is a :class:`~subnet.room.errors.RoomError`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bittensor.sp_core import verify

from .errors import RoomError

if TYPE_CHECKING:
    from ..wire import Signer  # a Protocol; importing subnet.wire loads torch

DOMAIN = b"beam-room-v1\x00"
MAX_DOC_BYTES = 256 * 1024  # a room of hundreds of members is tens of kB


def canonical(body: Any) -> bytes:
    """The canonical JSON bytes of ``body`` (what is signed and hashed)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class SignedDoc:
    """A verified document: who signed it, its kind and its body (plain JSON data)."""

    kind: str
    signer: str
    body: dict[str, Any]
    raw: bytes  # the exact bytes read (write-once comparisons, digests)

    @property
    def digest(self) -> str:
        """sha256 hex of the signed content (kind, signer, body)."""
        return hashlib.sha256(
            self.kind.encode() + b"\0" + self.signer.encode() + b"\0" + canonical(self.body)
        ).hexdigest()


def _message(kind: str, body: dict[str, Any]) -> bytes:
    return DOMAIN + kind.encode() + b"\0" + canonical(body)


def sign_doc(signer: Signer, kind: str, body: dict[str, Any]) -> bytes:
    """The signed document bytes of ``body``."""
    signature = signer.sign(_message(kind, body))
    doc = {"kind": kind, "signer": signer.ss58_address, "body": body, "signature": signature.hex()}
    return canonical(doc)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity cannot be canonical


def _finite(literal: str) -> float:
    # 1e400 parses as infinity, which cannot be canonical either; a literal past 64 characters
    # is an attack on the parser, not a number.
    value = float(literal) if len(literal) <= 64 else math.inf
    if not math.isfinite(value):
        raise ValueError(f"{literal[:20]} is not a finite number")
    return value


def _small_int(literal: str) -> int:
    if len(literal.lstrip("-")) > 64:  # int() refuses past 4,300 digits only after the work
        raise ValueError(f"a {len(literal)}-digit integer")
    return int(literal)


def parse_doc(raw: bytes, kind: str) -> SignedDoc:
    """Verify and parse a document of ``kind``; RoomError with a reason for anything else."""
    if not isinstance(raw, bytes | bytearray) or len(raw) > MAX_DOC_BYTES:
        raise RoomError("malformed", "not bytes, or larger than a room document may be")
    try:
        hooks = {"parse_float": _finite, "parse_int": _small_int}
        doc = json.loads(bytes(raw), parse_constant=_no_constant, **hooks)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise RoomError("malformed", f"not JSON ({error.__class__.__name__})") from None
    if not isinstance(doc, dict) or set(doc) != {"kind", "signer", "body", "signature"}:
        raise RoomError("malformed", "a signed document has exactly kind, signer, body, signature")
    k, signer, body, sig = doc["kind"], doc["signer"], doc["body"], doc["signature"]
    if not all(isinstance(v, str) for v in (k, signer, sig)) or not isinstance(body, dict):
        raise RoomError("malformed", "kind, signer and signature are strings; body an object")
    if k != kind:
        raise RoomError("wrong_kind", f"a {k!r} document where a {kind!r} was expected")
    try:
        signature = bytes.fromhex(sig)
        valid = len(signature) == 64 and bool(verify(_message(k, body), signature, signer))
    except (ValueError, TypeError) as error:  # bad hex, bad address
        raise RoomError("bad_signature", str(error)) from None
    if not valid:
        raise RoomError("bad_signature", f"not signed by {signer} (forged or tampered)")
    return SignedDoc(k, signer, body, bytes(raw))
