"""The signed envelope every object that crosses the network travels in.

Layout (all integers big-endian)::

    b"BEAM" | u8 layout version | u32 header length H | header JSON (H bytes)
    | 64-byte sr25519 signature | safetensors payload

The signature covers `DOMAIN + everything before it` (magic through header), and the header holds
the payload's length and sha256, so the signature binds the payload. Run, window, kind and base
model version live inside the signed header: an envelope replayed into another window, run or kind
is rejected even though its signature is valid.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from bittensor.sp_core import verify
from pydantic import ValidationError

from subnet.storage.keys import PROTOCOL_VERSION, ObjectKind, lane_of
from subnet.wire.fields import DuplicateKey, unique_keys
from subnet.wire.header import Expected, Header, Signer
from subnet.wire.payload import (
    PayloadSpec,
    check_table,
    check_values,
    encode_payload,
    load_tensors,
    read_table,
)
from subnet.wire.reasons import Reason, Rejected
from subnet.wire.schema import M, Message, NoMeta, parse_metadata

MAGIC = b"BEAM"
LAYOUT_VERSION = 1
DOMAIN = b"beam-envelope-v1\x00"  # so an envelope signature can never pass for another message
MAX_HEADER_BYTES = 1024  # a real header is under 500 bytes (every field is bounded)
SIGNATURE_BYTES = 64
_PREFIX = struct.Struct(">4sBI")
# The largest seal (``verify_seal``) of a valid envelope
SEAL_BYTES = _PREFIX.size + MAX_HEADER_BYTES + SIGNATURE_BYTES


@dataclass(frozen=True)
class Envelope:
    """A verified envelope: its signed header, its tensors, the payload's string metadata as
    signed, and that metadata parsed by its kind's schema (``meta``: what roles read)."""

    header: Header
    tensors: dict[str, torch.Tensor] = field(repr=False)
    metadata: dict[str, str]
    # The signed bytes (magic through header) and the signature, without the payload: proof,
    # to anyone with the sender's address, that the sender signed this header (``verify_seal``).
    seal: bytes = field(default=b"", repr=False)
    meta: Message = field(default_factory=NoMeta)

    def message(self, schema: type[M]) -> M:
        """``meta`` as ``schema`` (the schema of the envelope's kind, ``subnet.wire.SCHEMAS``)."""
        if not isinstance(self.meta, schema):
            raise Rejected(Reason.WRONG_KIND, f"a {self.header.kind.value} is no {schema.__name__}")
        return self.meta


def encode_envelope(
    *,
    signer: Signer,
    run: str,
    kind: ObjectKind,
    window: int,
    tensors: Mapping[str, torch.Tensor],
    base_version: int | None = None,
    metadata: Mapping[str, str] | None = None,
    version: int = PROTOCOL_VERSION,
    lane: str | None = None,
    plan: str | None = None,
) -> bytes:
    """Serialize `tensors` as safetensors, wrap them in a header, and sign it as `signer`.

    `metadata` is the wire form of the kind's message (``subnet.wire.schema``: ``wire()``);
    `plan` the run plan's digest the object was made under."""
    payload = encode_payload(tensors, metadata or {})
    header = Header(
        version=version,
        run=run,
        kind=ObjectKind(kind),
        lane=lane_of(kind, lane),
        window=window,
        sender=signer.ss58_address,
        base_version=base_version,
        plan=plan,
        payload_bytes=len(payload),
        payload_sha256=hashlib.sha256(payload).hexdigest(),
    )
    header_bytes = header.model_dump_json().encode()
    signed = _PREFIX.pack(MAGIC, LAYOUT_VERSION, len(header_bytes)) + header_bytes
    signature = bytes(signer.sign(DOMAIN + signed))
    if len(signature) != SIGNATURE_BYTES:
        raise ValueError(f"signer returned {len(signature)} bytes, expected {SIGNATURE_BYTES}")
    return signed + signature + payload


def verify_envelope(
    blob: bytes, expected: Expected, spec: PayloadSpec | None, *, max_bytes: int
) -> Envelope:
    """Run every check, in order, and return the envelope; raise `Rejected` at the first failure.

    Order: size, structure, signature, header fields, payload size and digest, tensor table
    against `spec` (skipped when None), values (finiteness, sparse index ranges), then the
    metadata against its kind's schema (``subnet.wire.schema``).
    """
    if len(blob) > max_bytes:
        raise Rejected(Reason.TOO_LARGE, f"{len(blob)} bytes > limit {max_bytes}")
    header, seal_end = _signed_header(blob, expected)
    payload = blob[seal_end:]
    if len(payload) != header.payload_bytes:
        raise Rejected(
            Reason.SIZE_MISMATCH, f"{len(payload)} bytes, header says {header.payload_bytes}"
        )
    if hashlib.sha256(payload).hexdigest() != header.payload_sha256:
        raise Rejected(Reason.DIGEST_MISMATCH, "payload sha256 differs from the signed header")
    table, metadata = read_table(payload)
    if spec is not None:
        check_table(table, spec)
    tensors = load_tensors(payload)
    check_values(tensors, spec)
    meta = parse_metadata(header.kind, metadata, header.window)
    return Envelope(header, tensors, metadata, blob[:seal_end], meta)


def verify_seal(seal: bytes, expected: Expected) -> Header:
    """The header an envelope's ``seal`` proves its sender signed, checked against ``expected``;
    raises ``Rejected`` like ``verify_envelope`` (a seal carries no payload to check).

    Two seals of one sender for the same run, lane, kind and window that name different
    payload digests prove that the sender signed two payloads where it may sign one.
    """
    if len(seal) > SEAL_BYTES:
        raise Rejected(Reason.TOO_LARGE, f"a seal of {len(seal)} bytes")
    header, seal_end = _signed_header(seal, expected)
    if len(seal) != seal_end:
        raise Rejected(Reason.MALFORMED_ENVELOPE, "a seal is the signed header and signature only")
    return header


def _signed_header(blob: bytes, expected: Expected) -> tuple[Header, int]:
    """Structure, signature and header fields: the header, and where the seal ends (the
    payload begins); what an envelope and a seal are both checked for, in that order."""
    header, signed_end = _read_header(blob)
    _check_signature(blob, signed_end, header, expected.sender)
    check_header(header, expected)
    return header, signed_end + SIGNATURE_BYTES


def envelope_header(blob: bytes) -> Header:
    """The header of an envelope (or a seal) as written, parsed but not verified: for one this
    process just encoded, or to learn what to verify a peer's seal against (never to trust it:
    ``verify_envelope`` and ``verify_seal`` are for that). Raises ``Rejected`` if malformed."""
    return _read_header(blob)[0]


def check_header(header: Header, expected: Expected) -> None:
    """The signed header against what the reader expects from the object's key and bucket."""
    pairs = [
        (Reason.WRONG_VERSION, header.version, expected.version),
        (Reason.WRONG_SENDER, header.sender, expected.sender),
        (Reason.WRONG_RUN, header.run, expected.run),
        (Reason.WRONG_KIND, header.kind, ObjectKind(expected.kind)),
        (Reason.WRONG_LANE, header.lane, expected.lane_name),
        (Reason.WRONG_WINDOW, header.window, expected.window),
    ]
    if expected.base_version is not None:
        pairs.append((Reason.WRONG_BASE_VERSION, header.base_version, expected.base_version))
    if expected.plan is not None:
        pairs.append((Reason.WRONG_PLAN, header.plan, expected.plan))
    for reason, got, want in pairs:
        if got != want:
            raise Rejected(reason, f"got {_show(got)}, expected {_show(want)}")


def _read_header(blob: bytes) -> tuple[Header, int]:
    """Parse the framing and header; returns the header and the offset where the signature starts."""
    if len(blob) < _PREFIX.size:
        raise Rejected(Reason.MALFORMED_ENVELOPE, f"only {len(blob)} bytes")
    magic, layout, header_len = _PREFIX.unpack_from(blob)
    if magic != MAGIC:
        raise Rejected(Reason.MALFORMED_ENVELOPE, "not a Beam envelope (bad magic)")
    if layout != LAYOUT_VERSION:
        raise Rejected(Reason.WRONG_VERSION, f"envelope layout {layout}, expected {LAYOUT_VERSION}")
    end = _PREFIX.size + header_len
    if header_len > MAX_HEADER_BYTES or end + SIGNATURE_BYTES > len(blob):
        raise Rejected(Reason.MALFORMED_ENVELOPE, f"header length {header_len} out of bounds")
    raw = blob[_PREFIX.size : end]
    try:  # the signed header reads one way only: a key named twice is refused
        json.loads(raw, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise Rejected(Reason.DUPLICATE_KEY, f"header: {exc}") from None
    except (ValueError, RecursionError):
        pass  # not JSON: the schema's parse below says what is wrong
    try:
        return Header.model_validate_json(raw), end
    except ValidationError as exc:
        raise Rejected(Reason.MALFORMED_HEADER, _first_error(exc)) from None


def _check_signature(blob: bytes, signed_end: int, header: Header, sender: str) -> None:
    signature = blob[signed_end : signed_end + SIGNATURE_BYTES]
    try:
        valid = bool(verify(DOMAIN + blob[:signed_end], signature, sender))
    except (ValueError, TypeError) as exc:  # malformed address or signature bytes
        raise Rejected(Reason.BAD_SIGNATURE, str(exc)) from None
    if valid:
        return
    if header.sender != sender:
        raise Rejected(Reason.WRONG_SENDER, f"header names {header.sender}, bucket owner {sender}")
    raise Rejected(Reason.BAD_SIGNATURE, f"not signed by {sender}")


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'header'}: {first['msg']}"[:200]


def _show(value: object) -> str:
    return value.value if isinstance(value, ObjectKind) else repr(value)
