"""Fuzz what is accepted, not only what is read: hostile metadata in correctly signed envelopes.

Every envelope here passes the outer checks (a valid signature, the right run, window, lane and
plan, a well-formed payload), so the metadata's schema is really reached. Each kind's metadata
is mutated at random (digits of other scripts, signs, spaces, trailing newlines, NaN, infinity,
1e400, 5,000-digit numbers, empty and unknown fields, hostile JSON: deep, duplicate keys,
non-ss58 keys, wrong types) and then either refused with a code of the one ``Reason`` enum or
accepted with finite, bounded typed fields; what is accepted is then taken through every
consumer of it (receipt and prefix checks, error-feedback commitments, a tree child's weight and loss, units
and fractions, score binding, merge weights, consensus medians, data grants, final markers),
and no exception may escape and no non-finite number may come out.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch
from bittensor.sp_core import Keypair
from pydantic import BaseModel

from subnet.compression import CompressionConfig, build_compressor
from subnet.config import BeamConfig, ProtocolConfig
from subnet.data import sample_receipt
from subnet.neuron.actions.consensus import median_weights
from subnet.neuron.actions.grants import granted, grants_for
from subnet.neuron.actions.tree import child_part
from subnet.neuron.answers import Malformed, commitments
from subnet.neuron.lanes import Inbox
from subnet.neuron.uploads import collect_uploads
from subnet.scoring import merge_weights
from subnet.scoring.merge import MAX_SHARE
from subnet.scoring.report import bind_scores, contradicted, nobody_scored
from subnet.storage.keys import ObjectKind, object_key, parse_key
from subnet.storage.memory import MemoryStore
from subnet.wire import (
    SCHEMAS,
    CheckNotice,
    CheckVerdict,
    Expected,
    FinalMeta,
    GradientMeta,
    GrantMeta,
    Reason,
    Rejected,
    ScoreReportMeta,
    WeightsMeta,
    encode_envelope,
    publish_envelope,
    verify_envelope,
)
from subnet.wire.fields import is_ss58
from subnet.wire.reasons import is_code
from subnet.wire.schema import MAX_TARGETS, RESULTS

PLAN = "0123456789abcdef"
RUN, WINDOW, VERSION = "fuzz", 7, 3
KEYS = [Keypair.create_from_uri(f"//fuzz{i}") for i in range(4)]
HOTKEYS = [k.ss58_address for k in KEYS]
SENDER = KEYS[0]

# Values a hostile sender puts where a count, a number, a digest or a JSON document belongs
HOSTILE = [
    "",
    " ",
    "0",
    "1",
    "-1",
    "+1",
    " 1",
    "1 ",
    "1\n",
    "\n1",
    "\t",
    "²",
    "٣",
    "１",
    "1²",
    "1e3",
    "1E3",
    "1e400",
    "-1e400",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "0x10",
    "1_000",
    "9" * 12,
    "9" * 13,
    "9" * 5000,
    "1.5",
    "-0",
    "00",
    "0.0",
    "-0.0",
    "1e-400",
    "999999.999999",
    "1000000.000001",
    "fresh",
    "fresh\n",
    "FRESH",
    "a" * 64,
    "A" * 64,
    "a" * 63,
    "a" * 64 + "\n",
    "g" * 64,
    "\x00",
    "null",
    "true",
    "false",
    "[]",
    "{}",
    "[1]",
    '{"a": 1}',
    "[" * 5000 + "]" * 5000,
    '{"x": ' * 3000 + "1" + "}" * 3000,
    "é" * 100,
]


def hostile_json(rng: random.Random, depth: int = 0) -> object:
    """A JSON value meant to break a reader of ``{hotkey: value}`` objects."""
    roll = rng.random()
    if roll < 0.25 and depth < 3:
        keys = rng.choice([HOTKEYS, ["x", "", "a" * 48, HOTKEYS[0] + "\n", "５" * 48]])
        return {rng.choice(keys): hostile_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if roll < 0.4 and depth < 3:
        return [hostile_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return rng.choice(
        [0, 1, -1, 2**40, 2**70, 0.5, -0.5, 1e300, 1e9, 1e9 + 1, True, None, "1", "a" * 64, ""]
    )


def hostile_text(rng: random.Random, honest: str) -> str:
    """A hostile replacement for one metadata value (JSON fields get hostile JSON too)."""
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(HOSTILE)
    if roll < 0.6 and honest.startswith("{"):
        text = json.dumps(hostile_json(rng))
        return text.replace("1e+300", "1e400") if rng.random() < 0.2 else text
    if roll < 0.75 and honest.startswith("{"):  # the same document with every key twice
        pairs = [p.strip() for p in honest.strip("{}").split(",") if p.strip()]
        return "{" + ", ".join(pairs * 2) + "}"
    if roll < 0.9:  # one character changed, inserted or removed
        at = rng.randrange(len(honest) + 1)
        char = rng.choice("0123456789abcdef-+. \n²１eE{}[]\"'")
        return honest[:at] + char + honest[at + rng.randint(0, 1) :]
    return honest


def mutate(rng: random.Random, honest: dict[str, str]) -> dict[str, str]:
    """``honest`` with one to three fields replaced, dropped, or an unknown one added."""
    meta = dict(honest)
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.75 and meta:
            name = rng.choice(sorted(meta))
            meta[name] = hostile_text(rng, meta[name])
        elif roll < 0.9 and meta:
            del meta[rng.choice(sorted(meta))]
        else:
            meta[rng.choice(["plan", "extra", "", "samples\n", "LOSS"])] = rng.choice(HOSTILE)
    return meta


def honest(kind: ObjectKind) -> dict[str, str]:
    """What an honest sender of ``kind`` signs."""
    a, b = HOTKEYS[1], HOTKEYS[2]
    messages = {
        ObjectKind.GRADIENT: GradientMeta(
            receipt=sample_receipt(list(range(8))),
            samples=8,
            steps=4,
            tokens=128,
            loss=5.25,
            state_in="b" * 64,
            state_from=5,
            state_out="c" * 64,
            members=2,
            subtree_samples=16,
        ),
        ObjectKind.SCORES: ScoreReportMeta(scores={a: 0.5, b: 0.0}, digests={a: "d" * 64}),
        ObjectKind.WEIGHTS: WeightsMeta(scores={a: 0.75, b: 0.25}),
        ObjectKind.DATA_GRANT: GrantMeta(grants={a: (0, 1), b: (2, 3)}),
        ObjectKind.RUN_FINAL: FinalMeta.model_validate({"final": '{"loss": 4.5, "window": 6}'}),
        ObjectKind.CHECKS: CheckNotice(
            targets=(a, b),
            verdicts=(CheckVerdict(5, a, "pass", 1.5e-5), CheckVerdict(4, b, "check_codec", 1e9)),
        ),
    }
    return messages[kind].wire()


def signed(kind: ObjectKind, metadata: dict[str, str], signer: Keypair = SENDER) -> bytes:
    return encode_envelope(
        signer=signer,
        run=RUN,
        kind=kind,
        window=WINDOW,
        metadata=metadata,
        tensors={"none": torch.zeros(1)},
        base_version=VERSION,
        plan=PLAN,
    )


def expect(kind: ObjectKind, signer: Keypair = SENDER) -> Expected:
    return Expected(RUN, WINDOW, kind, signer.ss58_address, base_version=VERSION, plan=PLAN)


def assert_finite(value: object) -> None:
    """Every number in a parsed message is finite (and every integer bounded)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        for item in value.values():
            assert_finite(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            assert_finite(item)
    elif isinstance(value, float):
        assert math.isfinite(value), value
    elif isinstance(value, int):
        assert abs(value) < 2**63, value


def fuzzed(kind: ObjectKind, cases: int, seed: int):
    """``(metadata, accepted message or the refusal)`` for ``cases`` mutations of ``kind``."""
    rng = random.Random(seed)
    base = honest(kind)
    for _ in range(cases):
        meta = mutate(rng, base)
        try:
            envelope = verify_envelope(signed(kind, meta), expect(kind), None, max_bytes=1 << 22)
        except Rejected as refused:
            yield meta, refused
            continue
        yield meta, envelope.meta


KINDS = [
    ObjectKind.GRADIENT,
    ObjectKind.SCORES,
    ObjectKind.WEIGHTS,
    ObjectKind.DATA_GRANT,
    ObjectKind.RUN_FINAL,
    ObjectKind.CHECKS,
]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.value)
def test_hostile_metadata_is_refused_with_a_code_or_parsed_finite(kind: ObjectKind) -> None:
    refused, accepted = 0, 0
    for meta, outcome in fuzzed(kind, 300, seed=KINDS.index(kind)):
        if isinstance(outcome, Rejected):
            assert isinstance(outcome.reason, Reason) and is_code(outcome.reason.value), meta
            assert outcome.reason is not Reason.UNREADABLE
            refused += 1
            continue
        assert isinstance(outcome, SCHEMAS[kind]), meta
        assert_finite(outcome)
        accepted += 1
    assert refused > 100 and accepted > 0  # the mutations reach both sides of the schema


def test_the_issues_examples_are_refused_with_their_reasons() -> None:
    """A superscript ``state_from`` (``str.isdigit`` says yes, ``int`` says no), a tree loss of
    NaN, inf or 1e400, a member count of a word, a digest with a trailing newline."""
    base = honest(ObjectKind.GRADIENT)
    cases = {
        "state_from": ("²", Reason.CHECK_MALFORMED),
        "loss": ("NaN", Reason.BAD_METADATA),
        "members": ("many", Reason.BAD_METADATA),
        "samples": ("8\n", Reason.BAD_METADATA),
        "receipt": (base["receipt"] + "\n", Reason.BAD_RECEIPT),
        "state_out": ("c" * 64 + "\n", Reason.CHECK_MALFORMED),
        "tokens": ("9" * 5000, Reason.BAD_METADATA),
    }
    for name, (value, reason) in cases.items():
        with pytest.raises(Rejected) as caught:
            GradientMeta.parse({**base, name: value}, window=WINDOW)
        assert caught.value.reason is reason, name
    for loss in ("inf", "1e400", "-1"):
        with pytest.raises(Rejected):
            GradientMeta.parse({**base, "loss": loss}, window=WINDOW)


# -- gradients through their consumers ----------------------------------------------------------


@dataclass
class Readers:
    stores: dict = field(default_factory=dict)

    def get(self, hotkey):
        return self.stores.get(hotkey)


def test_accepted_gradients_go_through_every_consumer() -> None:
    """Uploads, error-feedback commitments, a tree child's weight and loss, units and fractions."""
    protocol = ProtocolConfig(
        holder_hotkey="x", inner={"steps": 4, "micro_batch": 2, "min_steps": 1}
    )
    rt = SimpleNamespace(
        cfg=BeamConfig(protocol=protocol),
        readers=Readers(),
        max_bytes=1 << 22,
        plan=SimpleNamespace(digest=PLAN, slots={}),
        inbox=lambda lane: Inbox(protocol.run, lane, PLAN),
    )
    compressor = build_compressor(CompressionConfig(name="dense-fp32"))
    shapes = {"w": (4, 4)}
    payload = compressor.encode({"w": torch.full((4, 4), 0.01)})
    rng = random.Random(7)
    senders, ids = [], list(range(8))
    for i in range(200):
        signer = Keypair.create_from_seed(bytes([i % 256, 1 + i // 256]) + bytes(30))
        store = MemoryStore(f"s{i}")
        meta = mutate(rng, honest(ObjectKind.GRADIENT))
        publish_envelope(
            store,
            signer=signer,
            run=protocol.run,
            kind=ObjectKind.GRADIENT,
            window=WINDOW,
            tensors=payload,
            base_version=VERSION,
            metadata=meta,
            plan=PLAN,
        )
        rt.readers.stores[signer.ss58_address] = store
        senders.append(signer.ss58_address)
    got = collect_uploads(
        rt,
        WINDOW,
        senders,
        base_version=VERSION,
        compressor=compressor,
        shapes=shapes,
        assigned=lambda hotkey: ids,
    )

    assert not got.missing and not got.stale
    assert all(is_code(why) and why != Reason.UNREADABLE for why in got.rejected.values())
    assert len(got.accepted) > 10 and len(got.rejected) > 100
    for upload in got.accepted.values():
        assert_finite(upload.meta)
        assert 0 < upload.samples <= len(ids) and 0.0 < upload.fraction <= 1.0
        assert upload.tokens >= 0 and upload.steps >= 1
        try:
            digest_in, source, digest_out = commitments(upload.meta, WINDOW)
            assert source is None or 0 <= source < WINDOW
        except Malformed:
            assert upload.meta.state_in is None or upload.meta.state_out == "fresh"
        (delta, weight), members = child_part(upload, cap=3)
        assert 1 <= members <= 3 and weight == members and set(delta) == set(shapes)
    losses = [(u.meta.loss, 1.0) for u in got.accepted.values() if u.meta.loss is not None]
    assert losses and math.isfinite(sum(v * w for v, w in losses) / sum(w for _, w in losses))
    units = {hk: u.samples for hk, u in got.accepted.items()}
    weights = merge_weights({}, set(), units)  # the holder's fallback: units trained
    assert weights and all(math.isfinite(w) for w in weights.values())


# -- score reports and weights through scoring ------------------------------------------------


def test_accepted_reports_go_through_binding_medians_and_merge_weights() -> None:
    reports: dict[str, dict[str, float]] = {}
    bound: dict[str, dict[str, str]] = {}
    for i, (_, outcome) in enumerate(fuzzed(ObjectKind.SCORES, 300, seed=11)):
        if isinstance(outcome, ScoreReportMeta):
            reports[f"v{i}"], bound[f"v{i}"] = outcome.scores, outcome.digests
    for i, (_, outcome) in enumerate(fuzzed(ObjectKind.WEIGHTS, 300, seed=12)):
        if isinstance(outcome, WeightsMeta):
            reports[f"w{i}"] = outcome.scores if outcome.scores is not None else outcome.weights
    assert len(reports) > 20
    fetched = {HOTKEYS[1]: "d" * 64, HOTKEYS[2]: "e" * 64}
    trusted = set(reports)
    scores = {v: bind_scores(s, bound.get(v, {}), fetched) for v, s in reports.items()}
    assert contradicted(bound.values(), fetched) <= set(fetched)
    nobody_scored(scores, trusted, set(fetched))
    capped = merge_weights(scores, trusted, dict.fromkeys(HOTKEYS, 8))
    assert all(math.isfinite(w) and 0 <= w <= MAX_SHARE / len(HOTKEYS) for w in capped.values())
    assert not capped or sum(capped.values()) <= 1.0 + 1e-12
    got = median_weights(scores, trusted)
    assert all(math.isfinite(w) and w >= 0 for w in got.values())
    assert not got or math.isclose(sum(got.values()), 1.0)


# -- data grants and final markers through their readers --------------------------------------


def test_accepted_grants_go_through_the_granted_rule() -> None:
    lead = KEYS[3]
    store = MemoryStore("lead")
    lanes = {"grants": SimpleNamespace(kind=ObjectKind.DATA_GRANT.value)}
    protocol = ProtocolConfig(holder_hotkey="x", inner={"steps": 4, "micro_batch": 2})
    rt = SimpleNamespace(
        cfg=BeamConfig(protocol=protocol),
        plan=SimpleNamespace(digest=PLAN, lanes=lanes),
        writers=lambda lane: [lead.ss58_address],
        roster=SimpleNamespace(may=lambda hk, p: True),
        reader=lambda hotkey: store,
        inbox=lambda lane: Inbox(protocol.run, lane, PLAN),
    )
    data = SimpleNamespace(split_samples=lambda split: 10_000)
    rng = random.Random(13)
    accepted = 0
    for window in range(300):
        meta = mutate(rng, honest(ObjectKind.DATA_GRANT))
        blob = encode_envelope(
            signer=lead,
            run=protocol.run,
            kind=ObjectKind.DATA_GRANT,
            window=window,
            tensors={"none": torch.zeros(1)},
            metadata=meta,
            lane="grants",
            plan=PLAN,
        )
        key = object_key(
            protocol.run, ObjectKind.DATA_GRANT, window, lead.ss58_address, lane="grants"
        )
        store.put(key, blob)
        grants = grants_for(rt, window)
        ids = granted(rt, data, window)
        for hotkey, units in grants.items():
            assert all(type(u) is int and u >= 0 for u in units)
            assert all(0 <= i < 10_000 for i in ids(hotkey))
        accepted += bool(grants)
    assert accepted > 10


def test_accepted_final_markers_are_windows_and_finite_losses() -> None:
    seen = 0
    for _, outcome in fuzzed(ObjectKind.RUN_FINAL, 300, seed=17):
        if isinstance(outcome, FinalMeta):
            assert outcome.final.window >= 0 and math.isfinite(outcome.final.loss)
            seen += 1
    assert seen > 0


def test_accepted_check_notices_name_hotkeys_and_finite_errors() -> None:
    """What a miner (am I named?) and a validator (whom to confirm) read of a notice."""
    seen = 0
    for _, outcome in fuzzed(ObjectKind.CHECKS, 300, seed=23):
        if isinstance(outcome, CheckNotice):
            assert len(outcome.targets) <= MAX_TARGETS
            assert all(is_ss58(t) for t in outcome.targets)
            for verdict in outcome.verdicts:
                assert verdict.result in RESULTS and verdict.window >= 0
                assert math.isfinite(verdict.error) and 0 <= verdict.error <= 1e9
                assert verdict.ok == (verdict.result == "pass")
            seen += 1
    assert seen > 0


@pytest.mark.parametrize(
    "key",
    [
        "beam/v7/run/grads/gradient/٠٠٠٠٠٠٠٠٠٠٠٧/{hk}",  # other scripts' digits
        "beam/v٦/run/grads/gradient/000000000007/{hk}",
        "beam/v7/run/grads/gradient/000000000007/{hk}\n",  # a trailing newline
        "beam/v7/run\n/grads/gradient/000000000007/{hk}",
        "beam/v7/run/grads\n/gradient/000000000007/{hk}",
    ],
)
def test_object_keys_are_matched_whole_in_ascii(key: str) -> None:
    """A peer's listing names keys too: every part is matched whole, ASCII digits only."""
    with pytest.raises(ValueError):
        parse_key(key.format(hk=HOTKEYS[0]))
    assert parse_key(f"beam/v7/run/grads/gradient/000000000007/{HOTKEYS[0]}").window == 7
