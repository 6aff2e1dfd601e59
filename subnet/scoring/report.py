"""The score report schema, in one place: what a validator sends and the model holder reads.

A report is the `scores` metadata string of a validator's signed `scores` envelope: a flat JSON
object mapping miner hotkeys (ss58, checksum verified) to finite scores, e.g.
`{"5F...": 0.8, "5G...": 0.0}`, and beside it the `digests` string: the same kind of object
mapping each scored miner to the sha256 of the payload it scored. The holder merges a score only
into the bytes it was given for (`bind_scores`): a miner that serves the holder other bytes than
the validators, or rewrites its upload after being scored, is merged at 0.

The reader treats both as hostile: `parse_report` and `parse_digests` bound the text, the
nesting, the number of entries and every value before trusting it, and every malformed input
raises `ReportError` (a `ValueError`) with a reason code, never another exception, so one bad
validator costs only its own voice in the window.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Set

from bittensor.sp_core import ss58_decode

MAX_REPORT_CHARS = 256 * 1024  # 4,096 entries of ~60 characters fit with room to spare
MAX_DIGESTS_CHARS = 512 * 1024  # 4,096 entries of ~120 characters (hotkey and sha256 hex)
MAX_ENTRIES = 4096  # far above a subnet's 256 UIDs
MAX_ABS_SCORE = 1e9  # scores are loss improvements, O(1); beyond this a report is nonsense
_MAX_NUMBER_CHARS = 64  # a JSON number literal longer than this is an attack, not a score
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

REPORT_REASONS = (
    "not_text",  # not a str
    "too_long",  # longer than MAX_REPORT_CHARS
    "not_json",  # not valid JSON (including NaN / Infinity literals and huge literals)
    "too_deep",  # nested beyond the parser's limit
    "not_an_object",  # the top level is not {hotkey: score}
    "too_many_entries",  # more than MAX_ENTRIES
    "duplicate_key",  # the same hotkey twice (which one would count?)
    "bad_key",  # a key that is not a valid ss58 address
    "bad_score",  # a value that is not a finite number within MAX_ABS_SCORE (booleans too)
    "bad_digest",  # a digest that is not 64 lowercase hex characters
)


class ReportError(ValueError):
    """A score report that does not match the schema; `reason` is one of `REPORT_REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


def encode_report(scores: Mapping[str, float]) -> str:
    """The report text for `scores` (keys sorted); `ReportError` if it would not parse back."""
    text = json.dumps({str(k): float(v) for k, v in sorted(scores.items())}, allow_nan=False)
    parse_report(text)  # the writer obeys the same schema the reader enforces
    return text


def parse_report(text: object) -> dict[str, float]:
    """`{miner hotkey: score}` from a report's text, or `ReportError` with the reason."""
    out: dict[str, float] = {}
    for key, value in _entries(text):
        if not isinstance(value, float) or not math.isfinite(value) or abs(value) > MAX_ABS_SCORE:
            raise ReportError("bad_score", f"{key[:8]}: {type(value).__name__}")
        out[key] = value
    return out


def encode_digests(digests: Mapping[str, str]) -> str:
    """The `digests` text: each scored miner's payload sha256 (hex); `ReportError` if invalid."""
    text = json.dumps({str(k): str(v) for k, v in sorted(digests.items())})
    parse_digests(text)
    return text


def parse_digests(text: object) -> dict[str, str]:
    """`{miner hotkey: payload sha256}` from a report's `digests` text, or `ReportError`."""
    out: dict[str, str] = {}
    for key, value in _entries(text, MAX_DIGESTS_CHARS):
        if not isinstance(value, str) or not _HEX64.match(value):
            raise ReportError("bad_digest", key[:8])
        out[key] = value
    return out


def bind_scores(
    scores: Mapping[str, float], digests: Mapping[str, str], fetched: Mapping[str, str]
) -> dict[str, float]:
    """A report's scores, each counting only for the payload it was given for.

    `fetched` maps a miner to the sha256 of the payload the reader holds; a positive score whose
    digest differs (or is absent) becomes 0: the validator never saw these bytes. Miners the
    reader holds nothing of keep their score (it decides nothing there).
    """
    return {
        hotkey: score if hotkey not in fetched or digests.get(hotkey) == fetched[hotkey] else 0.0
        for hotkey, score in scores.items()
    }


def contradicted(reports: Iterable[Mapping[str, str]], fetched: Mapping[str, str]) -> set[str]:
    """Miners whose payload the reader holds differs from one a report names as scored.

    Senders sign one payload a window (and write it once), so each of these either rewrote its
    upload after the scoring or served this reader other bytes: the reader's seal of it, with
    the validator's, proves it signed two (``subnet.neuron.equivocation``). A report's own
    claim proves nothing: a validator naming a digest nobody signed convicts nobody.
    """
    return {hotkey for digests in reports for hotkey, digest in digests.items()
            if hotkey in fetched and digest != fetched[hotkey]}  # fmt: skip


def _entries(text: object, max_chars: int = MAX_REPORT_CHARS) -> list[tuple[str, object]]:
    """The `(hotkey, value)` pairs of a flat JSON object, bounded and checked, keys ss58."""
    if not isinstance(text, str):
        raise ReportError("not_text", type(text).__name__)
    if len(text) > max_chars:
        raise ReportError("too_long", f"{len(text)} characters > {max_chars}")
    try:
        raw = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_no_constant,
            parse_int=_number,
            parse_float=_number,
        )
    except RecursionError:
        raise ReportError("too_deep", "nested beyond the parser's limit") from None
    except ReportError:
        raise
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise ReportError("not_json", str(exc)[:120]) from None
    if not isinstance(raw, _Pairs):
        raise ReportError("not_an_object", type(raw).__name__)
    if len(raw) > MAX_ENTRIES:
        raise ReportError("too_many_entries", f"{len(raw)} > {MAX_ENTRIES}")
    seen: set[str] = set()
    for key, _ in raw:
        if key in seen:
            raise ReportError("duplicate_key", key[:60])
        if not _is_ss58(key):
            raise ReportError("bad_key", repr(key[:60]))
        seen.add(key)
    return list(raw)


def nobody_scored(
    reports: Mapping[str, Mapping[str, float]], validators: Set[str], uploads: Set[str]
) -> bool:
    """True when a window must not be merged for lack of scores (docs/reliability.md).

    `validators` are the trusted validators in the metagraph (the holder excluded); `reports`
    the usable reports they delivered for the window. When validators exist but none scored any
    of the window's `uploads` (all down, stalled, or their reports refused), weighting the uploads
    by units instead would hand a noise miner full weight, so the window is skipped. With no
    trusted validator at all (a subnet's bootstrap) the units fallback stays available.
    """
    if not uploads or not validators:
        return False
    return not any(hotkey in report for report in reports.values() for hotkey in uploads)


class _Pairs(list):
    """A JSON object as its list of pairs (so duplicates and nested objects stay visible)."""


def _pairs(pairs: list[tuple[str, object]]) -> _Pairs:
    return _Pairs(pairs)


def _no_constant(name: str) -> float:
    raise ReportError("not_json", f"{name} is not a JSON number")


def _number(literal: str) -> float:
    # Bounded before conversion: Python refuses int literals past 4,300 digits with a
    # ValueError, and float("1e999") is inf; both are caught here with a reason.
    if len(literal) > _MAX_NUMBER_CHARS:
        raise ReportError("bad_score", f"a {len(literal)}-character number")
    return float(literal)


def _is_ss58(key: str) -> bool:
    if not 40 <= len(key) <= 60:
        return False
    try:
        ss58_decode(key)
    except (ValueError, TypeError):
        return False
    return True
