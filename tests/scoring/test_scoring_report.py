"""The score report schema: exact round trips, and every malformed report refused with a reason."""

from __future__ import annotations

import json
import random

import pytest
from bittensor.sp_core import Keypair

from subnet.scoring.report import (
    MAX_ENTRIES,
    MAX_REPORT_CHARS,
    REPORT_REASONS,
    ReportError,
    bind_scores,
    contradicted,
    encode_digests,
    encode_report,
    parse_digests,
    parse_report,
)

A = Keypair.create_from_uri("//Alice").ss58_address
B = Keypair.create_from_uri("//Bob").ss58_address


def test_round_trip_is_exact() -> None:
    scores = {B: 0.125, A: -0.5, Keypair.create_from_uri("//Eve").ss58_address: 0.0}
    text = encode_report(scores)
    assert parse_report(text) == scores
    assert list(json.loads(text)) == sorted(scores)  # sorted keys: one text per report
    assert parse_report("{}") == {}


BAD: dict[str, tuple[object, str]] = {
    "not a string": (b"{}", "not_text"),
    "none": (None, "not_text"),
    "too long": ("{" + " " * MAX_REPORT_CHARS + "}", "too_long"),
    "empty": ("", "not_json"),
    "truncated": ('{"' + A + '": 0.5', "not_json"),
    "nan": ('{"' + A + '": NaN}', "not_json"),
    "infinity": ('{"' + A + '": -Infinity}', "not_json"),
    "overflowing float": ('{"' + A + '": 1e999}', "bad_score"),
    "huge int": ('{"' + A + '": ' + "9" * 5000 + "}", "bad_score"),
    "big but finite": ('{"' + A + '": 1e300}', "bad_score"),
    "deep list": ("[" * 100_000 + "]" * 100_000, "too_deep"),
    "deep object": ('{"a":' * 20_000 + "1" + "}" * 20_000, "too_deep"),
    "list at top": ("[1, 2]", "not_an_object"),
    "number at top": ("0.5", "not_an_object"),
    "string score": ('{"' + A + '": "0.5"}', "bad_score"),
    "list score": ('{"' + A + '": [0.5]}', "bad_score"),
    "nested score": ('{"' + A + '": {"x": 1}}', "bad_score"),
    "bool score": ('{"' + A + '": true}', "bad_score"),
    "null score": ('{"' + A + '": null}', "bad_score"),
    "non-ss58 key": ('{"miner-1": 0.5}', "bad_key"),
    "bad checksum": ('{"' + A[:-1] + ("Z" if A[-1] != "Z" else "Y") + '": 0.5}', "bad_key"),
    "duplicate key": ('{"' + A + '": 0.5, "' + A + '": 0.9}', "duplicate_key"),
    "too many": (json.dumps({f"k{i}": 0.0 for i in range(MAX_ENTRIES + 1)}), "too_many_entries"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_malformed_report_is_refused_with_its_reason(name: str) -> None:
    text, reason = BAD[name]
    with pytest.raises(ReportError) as caught:
        parse_report(text)
    assert caught.value.reason == reason
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError keep working


BAD_DIGESTS: dict[str, tuple[object, str]] = {
    "short": ('{"' + A + '": "abc"}', "bad_digest"),
    "upper case": ('{"' + A + '": "' + "AB" * 32 + '"}', "bad_digest"),
    "number": ('{"' + A + '": 5}', "bad_digest"),
    "list": ('{"' + A + '": ["' + "ab" * 32 + '"]}', "bad_digest"),
    "bad key": ('{"miner-1": "' + "ab" * 32 + '"}', "bad_key"),
    "not an object": ('["' + "ab" * 32 + '"]', "not_an_object"),
}


@pytest.mark.parametrize("name", sorted(BAD_DIGESTS))
def test_each_malformed_digest_list_is_refused_with_its_reason(name: str) -> None:
    text, reason = BAD_DIGESTS[name]
    with pytest.raises(ReportError) as caught:
        parse_digests(text)
    assert caught.value.reason == reason


def test_digests_round_trip_and_bind_each_score_to_the_bytes_it_was_given_for() -> None:
    digests = {A: "ab" * 32, B: "cd" * 32}
    assert parse_digests(encode_digests(digests)) == digests
    scores = {A: 0.5, B: 0.25}
    # The holder holds A's scored bytes, but B served it other bytes than the validator saw.
    bound = bind_scores(scores, digests, {A: "ab" * 32, B: "ef" * 32})
    assert bound == {A: 0.5, B: 0.0}
    assert bind_scores(scores, {}, {A: "ab" * 32}) == {A: 0.0, B: 0.25}  # no digest, no score
    assert bind_scores(scores, digests, {}) == scores  # nothing held: nothing to bind


def test_contradicted_names_who_served_other_bytes_than_a_report_names() -> None:
    held = {A: "ab" * 32, B: "ef" * 32}
    assert contradicted([{A: "ab" * 32, B: "cd" * 32}], held) == {B}
    assert contradicted([{A: "ab" * 32}, {A: "00" * 32}], held) == {A}  # any one report
    assert contradicted([{A: "ab" * 32, B: "ef" * 32}], held) == set()
    assert contradicted([{B: "cd" * 32}], {A: "ab" * 32}) == set()  # B: nothing held here


def test_every_reason_has_a_case() -> None:
    reasons = {reason for _, reason in BAD.values()} | {r for _, r in BAD_DIGESTS.values()}
    assert reasons == set(REPORT_REASONS)


def test_encode_refuses_what_parse_would() -> None:
    with pytest.raises(ReportError):
        encode_report({"not-a-hotkey": 0.5})
    with pytest.raises(ValueError):
        encode_report({A: float("nan")})


def _json_like(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(9 if depth < 4 else 5)
    leaves = [None, True, rng.uniform(-1e12, 1e12), rng.randrange(-(10**30), 10**30), A, "x"]
    if pick < 5:
        return rng.choice(leaves)
    if pick < 7:
        return [_json_like(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = [A, B, "", "5" * 48, A.lower()]
    return {rng.choice(keys): _json_like(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_fuzzed_reports_only_ever_raise_report_error() -> None:
    """Random JSON-ish values, byte mutations of a good report and splices: parse or refuse."""
    rng = random.Random(16)
    good = encode_report({A: 0.5, B: 0.25})
    outcomes: dict[str, int] = {}
    for i in range(3000):
        if i % 3 == 0:
            text = json.dumps(_json_like(rng))
        elif i % 3 == 1:
            chars = list(good)
            for _ in range(rng.randint(1, 4)):
                chars[rng.randrange(len(chars))] = rng.choice('{}[]":,.e-+0123456789aZ\\ \x00é')
            text = "".join(chars)
        else:
            cut = rng.randrange(len(good))
            text = (
                good[:cut]
                + rng.choice(["[", "{", '"', "1e", "NaN", "]]"]) * rng.randint(1, 9)
                + good[cut:]
            )
        try:
            parse_report(text)
            outcomes["ok"] = outcomes.get("ok", 0) + 1
        except ReportError as exc:
            outcomes[exc.reason] = outcomes.get(exc.reason, 0) + 1
    assert outcomes.get("ok", 0) > 0 and len(outcomes) >= 5, outcomes


def test_a_window_nobody_scored_is_not_merged_unless_there_are_no_validators() -> None:
    from subnet.scoring.report import nobody_scored

    uploads = {A, B}
    assert nobody_scored({}, {"v1"}, uploads)  # validators exist, no usable report
    assert nobody_scored({"v1": {}}, {"v1"}, uploads)  # a report that scored none of them
    assert not nobody_scored({"v1": {A: 0.0}}, {"v1"}, uploads)  # scored (even 0): merge rules
    assert not nobody_scored({}, set(), uploads)  # bootstrap: no validator, units fallback
    assert not nobody_scored({}, {"v1"}, set())  # nothing uploaded: nothing to decide


def test_a_report_of_the_most_miners_it_allows_encodes_its_digests() -> None:
    from subnet.scoring.report import MAX_DIGESTS_CHARS

    # 4,096 scored miners: every one named with its digest, within the digests' own bound.
    keys = [
        Keypair.create_from_seed(i.to_bytes(32, "big")).ss58_address for i in range(MAX_ENTRIES)
    ]
    text = encode_digests({k: f"{i:064x}" for i, k in enumerate(keys)})
    assert len(text) <= MAX_DIGESTS_CHARS and len(parse_digests(text)) == MAX_ENTRIES
    assert len(encode_report(dict.fromkeys(keys, 0.5))) <= MAX_REPORT_CHARS
