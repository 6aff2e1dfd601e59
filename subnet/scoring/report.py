"""The score report schema, in one place: what a validator sends and the model holder reads.

A report is the `scores` metadata string of a validator's signed `scores` envelope: a flat JSON
object mapping miner hotkeys (ss58, checksum verified) to finite scores, e.g.
`{"5F...": 0.8, "5G...": 0.0}`. The reader treats it as hostile: `parse_report` bounds the text,
the nesting, the number of entries and every value before trusting it, and every malformed input
raises `ReportError` (a `ValueError`) with a reason code, never another exception, so one bad
validator costs only its own voice in the window.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Set

from bittensor.sp_core import ss58_decode

MAX_REPORT_CHARS = 256 * 1024  # 4,096 entries of ~60 characters fit with room to spare
MAX_ENTRIES = 4096  # far above a subnet's 256 UIDs
MAX_ABS_SCORE = 1e9  # scores are loss improvements, O(1); beyond this a report is nonsense
_MAX_NUMBER_CHARS = 64  # a JSON number literal longer than this is an attack, not a score

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
    if not isinstance(text, str):
        raise ReportError("not_text", type(text).__name__)
    if len(text) > MAX_REPORT_CHARS:
        raise ReportError("too_long", f"{len(text)} characters > {MAX_REPORT_CHARS}")
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
    out: dict[str, float] = {}
    for key, value in raw:
        if key in out:
            raise ReportError("duplicate_key", key[:60])
        if not _is_ss58(key):
            raise ReportError("bad_key", repr(key[:60]))
        if not isinstance(value, float) or not math.isfinite(value) or abs(value) > MAX_ABS_SCORE:
            raise ReportError("bad_score", f"{key[:8]}: {type(value).__name__}")
        out[key] = value
    return out


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
