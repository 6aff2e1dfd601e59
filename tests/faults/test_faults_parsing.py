"""Total parsing: every reader of peer data turns any input into a value or its rejection type.

The fuzzers build hostile inputs that get *past* the outer checks (correctly signed envelopes
around lying safetensors tables, signed manifests with hostile JSON) so the inner parsers are
really reached, and assert that nothing but the reader's rejection type ever comes out.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct

import pytest
import safetensors.torch
import torch
from bittensor.sp_core import Keypair

from subnet.data.manifest import Manifest as DatasetManifest
from subnet.storage import MemoryStore
from subnet.storage.commitment import (
    CommitmentError,
    ReadSettings,
    decode_commitment,
    encode_commitment,
)
from subnet.storage.keys import PROTOCOL_VERSION, ObjectKind
from subnet.storage.readers import ReaderPool
from subnet.versions import SyncError, layout, read_manifest, read_pointer
from subnet.wire import Expected, Rejected, TensorSpec, encode_envelope, verify_envelope
from subnet.wire.envelope import DOMAIN, LAYOUT_VERSION, MAGIC

ALICE = Keypair.create_from_seed(bytes([1] * 32))
RUN = "run-1"
LIMIT = 1 << 22
SPEC = {"values": TensorSpec(torch.float32, (16,)), "indices": TensorSpec(torch.int32, (16,))}
EXPECT = Expected(RUN, 7, ObjectKind.GRADIENT, ALICE.ss58_address, base_version=2)


def hostile_json(rng: random.Random, depth: int = 0) -> object:
    """A JSON value chosen to break naive readers: wrong types, huge numbers, deep nesting."""
    pick = rng.randrange(14 if depth < 3 else 9)
    if pick == 0:
        return rng.choice([None, True, False, "", "x" * rng.randrange(300), "é\u0000"])
    if pick == 1:
        return rng.choice([0, -1, 2**31, 2**63, 2**64 + 1, -(2**63) - 1, 10**30])
    if pick == 2:
        return rng.choice([0.5, -0.0, 1e308, -1e-320, 3.0])
    if pick == 3:
        return rng.choice(["F32", "I32", "F64", "U8", "BOOL", "f32", "F8", "PKL"])
    if pick == 4:
        return [rng.randrange(-2, 2**40) for _ in range(rng.randrange(5))]
    if pick == 5:
        return rng.choice([[0, 64], [64, 0], [0, 2**63], [0], [0, 64, 128], [-1, 63], ["0", "64"]])
    if pick == 6:
        return Deep(rng.choice(["[", "{"]), rng.choice([64, 2000, 200_000]))
    if pick in (7, 8):
        return {"dtype": hostile_json(rng, 3), "shape": [16], "data_offsets": [0, 64]}
    if pick < 11:
        return [hostile_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["dtype", "shape", "data_offsets", "__metadata__", "values", "x", ""]
    return {rng.choice(keys): hostile_json(rng, depth + 1) for _ in range(rng.randrange(5))}


class Deep:
    """A marker for `dumps`: that many nested lists or objects."""

    def __init__(self, bracket: str, depth: int) -> None:
        self.bracket, self.depth = bracket, depth


def dumps(value: object) -> str:
    """JSON text of `value`, with `Deep` markers written out (json.dumps would recurse)."""
    if isinstance(value, Deep):
        if value.bracket == "[":
            return "[" * value.depth + "]" * value.depth
        return '{"a":' * value.depth + "0" + "}" * value.depth
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _honest_table() -> tuple[dict, bytes]:
    payload = safetensors.torch.save(
        {"values": torch.zeros(16), "indices": torch.zeros(16, dtype=torch.int32)}
    )
    size = int.from_bytes(payload[:8], "little")
    return json.loads(payload[8 : 8 + size]), payload[8 + size :]


def _seal_payload(payload: bytes) -> bytes:
    """A correctly signed envelope around `payload`, so the reader gets to the table."""
    header = {
        "version": PROTOCOL_VERSION, "run": RUN, "kind": "gradient", "lane": "grads", "window": 7,
        "sender": ALICE.ss58_address, "base_version": 2, "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }  # fmt: skip
    return _seal_header(json.dumps(header).encode(), payload)


def _seal_header(header: bytes, payload: bytes) -> bytes:
    signed = struct.pack(">4sBI", MAGIC, LAYOUT_VERSION, len(header)) + header
    return signed + ALICE.sign(DOMAIN + signed) + payload


def _hostile_table(rng: random.Random) -> bytes:
    table, data = _honest_table()
    mode = rng.randrange(4)
    if mode == 0:  # one field of one entry replaced
        name = rng.choice(["values", "indices"])
        table[name][rng.choice(["dtype", "shape", "data_offsets"])] = hostile_json(rng)
    elif mode == 1:  # an entry replaced or added
        table[rng.choice(["values", "indices", "extra", "__metadata__"])] = hostile_json(rng)
    elif mode == 2:  # the whole table replaced
        table = hostile_json(rng)
    else:  # metadata hostile
        table["__metadata__"] = (
            {"k": hostile_json(rng)} if rng.random() < 0.5 else hostile_json(rng)
        )
    text = dumps(table).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data


def test_fuzzed_safetensors_tables_are_only_ever_rejected() -> None:
    rng = random.Random(16)
    reasons: dict[str, int] = {}
    for _ in range(1500):
        blob = _seal_payload(_hostile_table(rng))
        for spec in (SPEC, None):
            try:
                verify_envelope(blob, EXPECT, spec, max_bytes=LIMIT)
                reasons["accepted"] = reasons.get("accepted", 0) + 1
            except Rejected as exc:
                reasons[exc.reason.value] = reasons.get(exc.reason.value, 0) + 1
    assert reasons.get("malformed_payload", 0) > 500, reasons


@pytest.mark.parametrize(
    "table",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"values":' * 50_000 + b"1" + b"}" * 50_000,
        b'{"values": {"dtype": ["F32"], "shape": [16], "data_offsets": [0, 64]}}',
        b'{"values": {"dtype": {"a": 1}, "shape": [16], "data_offsets": [0, 64]}}',
        b'{"values": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 64]}}',
        b'{"values": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 64]}}',
        b'{"values": {"dtype": "F32", "shape": [16], "data_offsets": [0, NaN]}}',
        b'{"values": {"dtype": "F32", "shape": [16], "data_offsets": "0-64"}}',
        b'{"values": {"dtype": "F32", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0]}}',
        b'{"__metadata__": {"a": ["b"]}}',
        b'{"__metadata__": [["a", "b"]]}',
        b'"just a string"',
    ],
    ids=lambda t: t[:24].decode(errors="replace"),
)
def test_tables_that_crashed_the_reader_are_rejected(table: bytes) -> None:
    table += b" " * (-len(table) % 8)
    payload = len(table).to_bytes(8, "little") + table + bytes(128)
    for spec in (SPEC, None):
        with pytest.raises(Rejected):
            verify_envelope(_seal_payload(payload), EXPECT, spec, max_bytes=LIMIT)


def test_fuzzed_envelope_headers_are_only_ever_rejected() -> None:
    rng = random.Random(17)
    fields = ["version", "run", "kind", "window", "sender", "base_version", "payload_bytes",
              "payload_sha256"]  # fmt: skip
    good = json.loads(
        _seal_payload(b"")[9 : 9 + struct.unpack_from(">I", _seal_payload(b""), 5)[0]]
    )
    for _ in range(800):
        header = dict(good)
        for _ in range(rng.randint(1, 3)):
            header[rng.choice([*fields, "extra"])] = hostile_json(rng)
        text = dumps(header).encode() if rng.random() < 0.9 else dumps(hostile_json(rng)).encode()
        with pytest.raises(Rejected):
            verify_envelope(_seal_header(text[:4096], b""), EXPECT, SPEC, max_bytes=LIMIT)


def _manifest_blob(rng: random.Random, pointer: bool) -> bytes:
    good = {"version": 4, "window": 12, "digest": "ab" * 32, "checkpoint_version": 3,
            "checkpoint_key": layout.checkpoint_key(RUN, ALICE.ss58_address, 3),
            "patch_key": layout.patch_key(RUN, ALICE.ss58_address, 4)}  # fmt: skip
    if rng.random() < 0.8:
        for _ in range(rng.randint(1, 2)):
            good[rng.choice([*good, "extra"])] = hostile_json(rng)
        text = dumps(good)
    else:
        text = dumps(hostile_json(rng))
    return encode_envelope(
        signer=ALICE, run=RUN, kind=ObjectKind.MODEL_MANIFEST, window=0 if pointer else 4,
        tensors={}, base_version=4, metadata={"manifest": text[:60_000]},
    )  # fmt: skip


def test_fuzzed_signed_manifests_are_only_ever_sync_errors() -> None:
    """Signed by the holder itself, yet hostile: the reader refuses with `bad_manifest`."""
    rng = random.Random(18)
    store, who = MemoryStore(), ALICE.ss58_address
    reasons: dict[str, int] = {}
    for _ in range(600):
        store.put(layout.manifest_key(RUN, who, 4), _manifest_blob(rng, pointer=False))
        store.put(layout.pointer_key(RUN, who), _manifest_blob(rng, pointer=True))
        for read in (
            lambda: read_manifest(store, RUN, who, 4),
            lambda: read_pointer(store, RUN, who),
        ):
            try:
                read()
                reasons["ok"] = reasons.get("ok", 0) + 1
            except SyncError as exc:
                reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
    assert reasons.get("bad_manifest", 0) > 900, reasons


def test_fuzzed_commitments_are_only_ever_commitment_errors() -> None:
    rng = random.Random(19)
    good = encode_commitment(
        ReadSettings(bucket="beam-m1", endpoint_url="http://127.0.0.1:9000", prefix="p/",
                     access_key_id="AKIA1234", secret_access_key="s3cr3t/+=")
    )  # fmt: skip
    alphabet = "|:/.-_+=@[]%\n\x00 é١aZ09"
    samples: list[object] = [None, 42, b"b1|aws", ["b1"], good * 3, "|" * 6, "b1" + "|" * 6]
    for _ in range(3000):
        chars = list(good)
        for _ in range(rng.randint(1, 5)):
            at = rng.randrange(len(chars))
            if rng.random() < 0.5:
                chars[at] = rng.choice(alphabet)
            else:
                del chars[at]
        samples.append("".join(chars))
    parsed = 0
    for sample in samples:
        try:
            decode_commitment(sample)  # type: ignore[arg-type]
            parsed += 1
        except CommitmentError:
            pass
    assert 0 < parsed < len(samples)
    pool = ReaderPool(factory=lambda s: MemoryStore(), allow_private_endpoints=True)
    pool.update({f"hk{i}": s for i, s in enumerate(samples) if isinstance(s, str)})
    assert len(pool) <= parsed  # the bad ones are recorded as invalid; none raised
    assert pool.invalid


def test_fuzzed_dataset_manifests_are_only_ever_value_errors() -> None:
    """The dataset manifest comes from the holder's bucket: hostile JSON is a ValueError."""
    rng = random.Random(20)
    for _ in range(400):
        text = dumps(hostile_json(rng))
        with pytest.raises(ValueError):
            DatasetManifest.from_bytes(text.encode())
