"""What a signature covers reads one way only, and a check notice vouches only for what its
validator could have proved: duplicate keys, repeated targets and out-of-range verdicts are
refused with a reason code; a patch of garbage is a ``PatchError``."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
import torch
from bittensor.sp_core import Keypair

from subnet.compression import PatchError, apply_patch, encode_patch
from subnet.storage.keys import ObjectKind
from subnet.wire import (
    CheckNotice,
    CheckVerdict,
    Expected,
    GradientMeta,
    Reason,
    Rejected,
    encode_envelope,
    verify_envelope,
)
from subnet.wire.envelope import DOMAIN, LAYOUT_VERSION, MAGIC
from subnet.wire.payload import read_table
from subnet.wire.schema import verdict_windows

SIGNER = Keypair.create_from_seed(bytes(range(32)))
OTHER = Keypair.create_from_seed(bytes(range(1, 33))).ss58_address
RUN = "run-1"


def _safetensors(header_json: str, data: bytes = b"") -> bytes:
    raw = header_json.encode()
    return len(raw).to_bytes(8, "little") + raw + data


def _resigned(header: dict, payload: bytes, duplicate: str | None = None) -> bytes:
    """An envelope whose header JSON is written by hand (``duplicate``: a key written twice,
    both times with its true value), signed by ``SIGNER``."""
    text = json.dumps(header)
    if duplicate is not None:
        text = text[:-1] + f", {json.dumps(duplicate)}: {json.dumps(header[duplicate])}}}"
    raw = text.encode()
    signed = struct.pack(">4sBI", MAGIC, LAYOUT_VERSION, len(raw)) + raw
    return signed + bytes(SIGNER.sign(DOMAIN + signed)) + payload


def _expected() -> Expected:
    return Expected(RUN, 5, ObjectKind.GRADIENT, SIGNER.ss58_address)


def _gradient() -> tuple[dict, bytes]:
    meta = GradientMeta(receipt="ab" * 32, samples=64, tokens=4096, loss=3.5).wire()
    blob = encode_envelope(
        signer=SIGNER, run=RUN, kind=ObjectKind.GRADIENT, window=5,
        tensors={"x": torch.ones(4)}, metadata=meta,
    )  # fmt: skip
    size = struct.unpack_from(">4sBI", blob)[2]
    header = json.loads(blob[9 : 9 + size])
    return header, blob[9 + size + 64 :]


def test_a_metadata_key_written_twice_is_refused() -> None:
    table = '{"__metadata__": {"threads": "17", "threads": "2"}}'
    with pytest.raises(Rejected) as caught:
        read_table(_safetensors(table))
    assert caught.value.reason == Reason.DUPLICATE_KEY and "threads" in str(caught.value)


def test_a_tensor_named_twice_is_refused() -> None:
    entry = '{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    with pytest.raises(Rejected) as caught:
        read_table(_safetensors(f'{{"x": {entry}, "x": {entry}}}', b"\0" * 4))
    assert caught.value.reason == Reason.DUPLICATE_KEY


def test_a_signed_payload_with_a_repeated_metadata_key_is_refused_by_the_envelope_reader() -> None:
    header, payload = _gradient()
    size = int.from_bytes(payload[:8], "little")
    table = payload[8 : 8 + size].decode()
    # The same bytes but "threads" a second time in the metadata, rehashed and signed again
    bad_table = table.replace('"__metadata__":{', '"__metadata__":{"loss":"9.0",', 1)
    assert bad_table != table and bad_table.count('"loss"') == 2
    bad = _safetensors(bad_table, payload[8 + size :])
    header.update(payload_bytes=len(bad), payload_sha256=hashlib.sha256(bad).hexdigest())
    with pytest.raises(Rejected) as caught:
        verify_envelope(_resigned(header, bad), _expected(), None, max_bytes=1 << 20)
    assert caught.value.reason == Reason.DUPLICATE_KEY


def test_a_header_key_written_twice_is_refused_even_with_one_value() -> None:
    header, payload = _gradient()
    verify_envelope(_resigned(header, payload), _expected(), None, max_bytes=1 << 20)  # as is
    with pytest.raises(Rejected) as caught:
        verify_envelope(_resigned(header, payload, "window"), _expected(), None, max_bytes=1 << 20)
    assert caught.value.reason == Reason.DUPLICATE_KEY


def test_a_notice_naming_one_target_twice_is_refused() -> None:
    with pytest.raises(Rejected) as caught:
        CheckNotice.parse({"targets": f"{OTHER},{OTHER}"})
    assert caught.value.reason == Reason.CHECK_BAD_NOTICE


def test_two_verdicts_on_one_upload_are_refused() -> None:
    verdicts = f"3,{OTHER},pass,0;3,{OTHER},check_mismatch,0.5"
    with pytest.raises(Rejected) as caught:
        CheckNotice.parse({"verdicts": verdicts})
    assert caught.value.reason == Reason.CHECK_BAD_NOTICE


@pytest.mark.parametrize("verdict_window", [11, 999_999_999_999, 5])
def test_a_verdict_outside_what_its_validator_could_have_checked_is_refused(
    verdict_window: int,
) -> None:
    notice = CheckNotice(verdicts=(CheckVerdict(verdict_window, OTHER, "pass", 0.0),))
    low, high = verdict_windows(10, 2)
    assert (low, high) == (6, 10)
    with pytest.raises(Rejected) as caught:
        notice.refuse_outside(10, 2)
    assert caught.value.reason == Reason.CHECK_BAD_NOTICE
    for ok in (low, high):
        CheckNotice(verdicts=(CheckVerdict(ok, OTHER, "pass", 0.0),)).refuse_outside(10, 2)


def test_a_patch_of_garbage_is_a_patch_error() -> None:
    base = {"w": torch.zeros(16)}
    target = {"w": torch.arange(16.0)}
    patch = encode_patch(base, target)
    garbage = torch.frombuffer(bytearray(b"not zlib at all" * 4), dtype=torch.uint8)
    with pytest.raises(PatchError) as caught:
        apply_patch(base, {**patch, "data": garbage})
    assert caught.value.reason == Reason.CORRUPT
