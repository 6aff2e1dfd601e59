"""The score report schema, in one place: what a validator sends and the model holder reads.

A report is the `scores` metadata string of a validator's signed `scores` envelope: a flat JSON
object mapping miner hotkeys (ss58, checksum verified) to finite scores, e.g.
`{"5F...": 0.8, "5G...": 0.0}`, and beside it the `digests` string: the same kind of object
mapping each scored miner to the sha256 of the payload it scored. The holder merges a score only
into the bytes it was given for (`bind_scores`): a miner that serves the holder other bytes than
the validators, or rewrites its upload after being scored, is merged at 0.

The reader treats both as hostile: the report's schema (`subnet.wire.ScoreReportMeta`, applied
where the envelope is accepted) bounds the text, the nesting, the number of entries and every
value before trusting it, and every malformed input is refused with a reason code, never another
exception, so one bad validator costs only its own voice in the window. `parse_report` and
`parse_digests` apply the same parsers to a text and raise `ReportError` (a `ValueError`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Set
from typing import TypeVar

from ..wire import Reason
from ..wire.fields import MAX_ENTRIES, FieldError
from ..wire.schema import MAX_ABS_SCORE, MAX_DIGESTS_CHARS, MAX_REPORT_CHARS, digest_map, score_map

__all__ = [
    "MAX_ABS_SCORE",
    "MAX_DIGESTS_CHARS",
    "MAX_ENTRIES",
    "MAX_REPORT_CHARS",
    "REPORT_REASONS",
    "ReportError",
    "bind_scores",
    "contradicted",
    "encode_digests",
    "encode_report",
    "nobody_scored",
    "parse_digests",
    "parse_report",
]

# The reasons a report is refused with (members of the one ``subnet.wire.Reason``)
REPORT_REASONS = (
    Reason.NOT_TEXT,  # not a str
    Reason.TOO_LONG,  # longer than MAX_REPORT_CHARS
    Reason.NOT_JSON,  # not valid JSON (including NaN / Infinity literals)
    Reason.TOO_DEEP,  # nested beyond the parser's limit
    Reason.NOT_AN_OBJECT,  # the top level is not {hotkey: score}
    Reason.TOO_MANY_ENTRIES,  # more than MAX_ENTRIES
    Reason.DUPLICATE_KEY,  # the same hotkey twice (which one would count?)
    Reason.BAD_KEY,  # a key that is not a valid ss58 address
    Reason.BAD_SCORE,  # not a finite number within MAX_ABS_SCORE (booleans, huge literals too)
    Reason.BAD_DIGEST,  # a digest that is not 64 lowercase hex characters
)
T = TypeVar("T")


class ReportError(ValueError):
    """A score report that does not match the schema; `reason` is one of `REPORT_REASONS`."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else str(reason))


def _checked(parse: Callable[[object], T], text: object) -> T:
    try:
        return parse(text)
    except FieldError as error:
        raise ReportError(error.reason, error.detail) from None


def encode_report(scores: Mapping[str, float]) -> str:
    """The report text for `scores` (keys sorted); `ReportError` if it would not parse back."""
    text = json.dumps({str(k): float(v) for k, v in sorted(scores.items())}, allow_nan=False)
    parse_report(text)  # the writer obeys the same schema the reader enforces
    return text


def parse_report(text: object) -> dict[str, float]:
    """`{miner hotkey: score}` from a report's text, or `ReportError` with the reason."""
    return _checked(score_map, text)


def encode_digests(digests: Mapping[str, str]) -> str:
    """The `digests` text: each scored miner's payload sha256 (hex); `ReportError` if invalid."""
    text = json.dumps({str(k): str(v) for k, v in sorted(digests.items())})
    parse_digests(text)
    return text


def parse_digests(text: object) -> dict[str, str]:
    """`{miner hotkey: payload sha256}` from a report's `digests` text, or `ReportError`."""
    return _checked(digest_map, text)


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
    return {
        hotkey
        for digests in reports
        for hotkey, digest in digests.items()
        if hotkey in fetched and digest != fetched[hotkey]
    }


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
