"""Hostile envelopes: every bad input is rejected with its reason; none crashes or passes."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable

import pytest
import safetensors.torch
import torch
from bittensor.sp_core import Keypair

from subnet.storage.keys import PROTOCOL_VERSION, ObjectKind
from subnet.wire import Expected, Reason, Rejected, TensorSpec, encode_envelope, verify_envelope
from subnet.wire.envelope import DOMAIN, LAYOUT_VERSION, MAGIC
from subnet.wire.reasons import ENVELOPE_CHECKS

ALICE = Keypair.create_from_seed(bytes([1] * 32))
MALLORY = Keypair.create_from_seed(bytes([2] * 32))
RUN = "run-1"
PLAN = "0123456789abcdef"
LIMIT = 1 << 20
SPEC = {
    "values": TensorSpec(torch.float32, (16,)),
    "indices": TensorSpec(torch.int32, (16,), index_bound=1000),
}


def _tensors(**overrides: torch.Tensor) -> dict[str, torch.Tensor]:
    tensors = {"values": torch.linspace(-1, 1, 16), "indices": torch.arange(16, dtype=torch.int32)}
    return {**tensors, **overrides}


def _seal(signer=ALICE, tensors=None, **header) -> bytes:
    fields = {"run": RUN, "kind": ObjectKind.GRADIENT, "window": 7, "base_version": 2}
    fields |= {"plan": PLAN, **header}
    return encode_envelope(signer=signer, tensors=tensors or _tensors(), **fields)


def _forge(header: dict | bytes, payload: bytes, signer=ALICE) -> bytes:
    """A correctly signed envelope around an arbitrary header (dict as JSON, or raw bytes)."""
    header_bytes = header if isinstance(header, bytes) else json.dumps(header).encode()
    signed = struct.pack(">4sBI", MAGIC, LAYOUT_VERSION, len(header_bytes)) + header_bytes
    return signed + signer.sign(DOMAIN + signed) + payload


def _honest_header(payload: bytes) -> dict:
    import hashlib

    return {
        "version": PROTOCOL_VERSION,
        "run": RUN,
        "kind": "gradient",
        "lane": "grads",
        "window": 7,
        "sender": ALICE.ss58_address,
        "base_version": 2,
        "plan": PLAN,
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }


def _payload_of(blob: bytes) -> bytes:
    header_len = struct.unpack_from(">I", blob, 5)[0]
    return blob[9 + header_len + 64 :]


def _flip(blob: bytes, index: int) -> bytes:
    return blob[:index] + bytes([blob[index] ^ 0x01]) + blob[index + 1 :]


GOOD = _seal()
HEADER_LEN = struct.unpack_from(">I", GOOD, 5)[0]
SIG_AT = 9 + HEADER_LEN


def _expect(**changes) -> Expected:
    fields = {
        "run": RUN,
        "window": 7,
        "kind": ObjectKind.GRADIENT,
        "sender": ALICE.ss58_address,
        "base_version": 2,
        "plan": PLAN,
        **changes,
    }
    return Expected(**fields)


class Case:
    def __init__(self, blob: Callable[[], bytes], reason: Reason, expected=None, limit=LIMIT):
        self.blob, self.reason, self.expected, self.limit = blob, reason, expected, limit


CASES: dict[str, Case] = {
    "oversized": Case(lambda: GOOD, Reason.TOO_LARGE, limit=len(GOOD) - 1),
    "empty": Case(lambda: b"", Reason.MALFORMED_ENVELOPE),
    "truncated_prefix": Case(lambda: GOOD[:6], Reason.MALFORMED_ENVELOPE),
    "truncated_header": Case(lambda: GOOD[: 9 + HEADER_LEN // 2], Reason.MALFORMED_ENVELOPE),
    "truncated_signature": Case(lambda: GOOD[: SIG_AT + 30], Reason.MALFORMED_ENVELOPE),
    "truncated_payload": Case(lambda: GOOD[:-10], Reason.SIZE_MISMATCH),
    "appended_bytes": Case(lambda: GOOD + b"\x00", Reason.SIZE_MISMATCH),
    "bad_magic": Case(lambda: b"PKL!" + GOOD[4:], Reason.MALFORMED_ENVELOPE),
    "pickle": Case(lambda: b"\x80\x04\x95" + GOOD, Reason.MALFORMED_ENVELOPE),
    "future_layout": Case(lambda: GOOD[:4] + bytes([9]) + GOOD[5:], Reason.WRONG_VERSION),
    "huge_header_length": Case(
        lambda: GOOD[:5] + struct.pack(">I", 2**31) + GOOD[9:], Reason.MALFORMED_ENVELOPE
    ),
    "flipped_header_bit": Case(
        lambda: GOOD.replace(b'"window":7', b'"window":6'), Reason.BAD_SIGNATURE
    ),
    "flipped_signature_bit": Case(lambda: _flip(GOOD, SIG_AT + 5), Reason.BAD_SIGNATURE),
    "flipped_payload_bit": Case(lambda: _flip(GOOD, len(GOOD) - 3), Reason.DIGEST_MISMATCH),
    "header_not_json": Case(lambda: _forge(b"{not json", b""), Reason.MALFORMED_HEADER),
    "header_not_utf8": Case(lambda: _forge(b"\xff\xfe{}", b""), Reason.MALFORMED_HEADER),
    "header_extra_field": Case(
        lambda: _forge({**_honest_header(b""), "pickle": "yes"}, b""), Reason.MALFORMED_HEADER
    ),
    "header_float_window": Case(
        lambda: _forge({**_honest_header(b""), "window": 7.0}, b""), Reason.MALFORMED_HEADER
    ),
    "wrong_signer": Case(
        lambda: _forge(_honest_header(b""), b"", signer=MALLORY), Reason.BAD_SIGNATURE
    ),
    "wrong_sender": Case(lambda: _seal(signer=MALLORY), Reason.WRONG_SENDER),
    "replayed_window": Case(lambda: GOOD, Reason.WRONG_WINDOW, _expect(window=8)),
    "replayed_run": Case(lambda: GOOD, Reason.WRONG_RUN, _expect(run="run-2")),
    "wrong_kind": Case(lambda: GOOD, Reason.WRONG_KIND, _expect(kind=ObjectKind.SCORES)),
    "wrong_lane": Case(lambda: GOOD, Reason.WRONG_LANE, _expect(lane="grads-b")),
    "stale_base": Case(lambda: GOOD, Reason.WRONG_BASE_VERSION, _expect(base_version=3)),
    "other_plan": Case(lambda: GOOD, Reason.WRONG_PLAN, _expect(plan="f" * 16)),
    "no_plan": Case(lambda: _seal(plan=None), Reason.WRONG_PLAN),
    "other_protocol": Case(lambda: _seal(version=PROTOCOL_VERSION + 1), Reason.WRONG_VERSION),
    "header_payload_swap": Case(
        lambda: GOOD[: SIG_AT + 64] + _payload_of(_seal(tensors=_tensors(values=torch.zeros(16)))),
        Reason.DIGEST_MISMATCH,
    ),
    "payload_not_safetensors": Case(
        lambda: _forge(_honest_header(b"garbage!" * 4), b"garbage!" * 4), Reason.MALFORMED_PAYLOAD
    ),
    "safetensors_bad_offsets": Case(lambda: _forge(*_bad_offsets()), Reason.MALFORMED_PAYLOAD),
    "wrong_dtype": Case(
        lambda: _seal(tensors=_tensors(values=torch.zeros(16, dtype=torch.float16))),
        Reason.DTYPE_MISMATCH,
    ),
    "wrong_shape": Case(
        lambda: _seal(tensors=_tensors(values=torch.zeros(17))), Reason.SHAPE_MISMATCH
    ),
    "wrong_rank": Case(
        lambda: _seal(tensors=_tensors(values=torch.zeros(4, 4))), Reason.SHAPE_MISMATCH
    ),
    "missing_tensor": Case(
        lambda: _seal(tensors={"values": torch.zeros(16)}), Reason.NAME_MISMATCH
    ),
    "extra_tensor": Case(
        lambda: _seal(tensors=_tensors(extra=torch.zeros(1))), Reason.NAME_MISMATCH
    ),
    "nan": Case(
        lambda: _seal(tensors=_tensors(values=torch.full((16,), float("nan")))), Reason.NON_FINITE
    ),
    "inf": Case(
        lambda: _seal(tensors=_tensors(values=torch.tensor([float("inf")] + [0.0] * 15))),
        Reason.NON_FINITE,
    ),
    "index_too_high": Case(
        lambda: _seal(tensors=_tensors(indices=torch.full((16,), 1000, dtype=torch.int32))),
        Reason.INDEX_OUT_OF_RANGE,
    ),
    "index_negative": Case(
        lambda: _seal(tensors=_tensors(indices=torch.full((16,), -1, dtype=torch.int32))),
        Reason.INDEX_OUT_OF_RANGE,
    ),
}


def _bad_offsets() -> tuple[dict, bytes]:
    payload = safetensors.torch.save(
        {"values": torch.zeros(16), "indices": torch.zeros(16, dtype=torch.int32)}
    )
    size = int.from_bytes(payload[:8], "little")
    table = json.loads(payload[8 : 8 + size])
    table["values"]["data_offsets"] = [0, 128]  # overlaps "indices"
    header = json.dumps(table).encode()
    header += b" " * (-len(header) % 8)
    forged = len(header).to_bytes(8, "little") + header + payload[8 + size :]
    return _honest_header(forged), forged


def test_the_good_envelope_passes() -> None:
    envelope = verify_envelope(GOOD, _expect(), SPEC, max_bytes=LIMIT)
    assert torch.equal(envelope.tensors["values"], _tensors()["values"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_bad_input_is_rejected_with_its_reason(name: str) -> None:
    case = CASES[name]
    with pytest.raises(Rejected) as caught:
        verify_envelope(case.blob(), case.expected or _expect(), SPEC, max_bytes=case.limit)
    assert caught.value.reason is case.reason, caught.value.detail


def test_random_mutations_never_pass_and_never_crash() -> None:
    rng = random.Random(1234)
    seen: set[Reason] = set()
    for _ in range(600):
        blob = bytearray(GOOD)
        mutation = rng.choice(["flip", "truncate", "insert", "splice"])
        at = rng.randrange(len(blob))
        if mutation == "flip":
            blob[at] ^= 1 << rng.randrange(8)
        elif mutation == "truncate":
            del blob[at:]
        elif mutation == "insert":
            blob[at:at] = rng.randbytes(rng.randint(1, 16))
        else:
            blob[at : at + 8] = rng.randbytes(8)
        if bytes(blob) == GOOD:
            continue
        with pytest.raises(Rejected) as caught:
            verify_envelope(bytes(blob), _expect(), SPEC, max_bytes=LIMIT)
        seen.add(caught.value.reason)
    assert {Reason.BAD_SIGNATURE, Reason.DIGEST_MISMATCH, Reason.MALFORMED_ENVELOPE} <= seen


def test_every_reason_has_a_fuzz_case() -> None:
    covered = {case.reason for case in CASES.values()}
    assert covered == set(ENVELOPE_CHECKS), set(ENVELOPE_CHECKS) - covered
