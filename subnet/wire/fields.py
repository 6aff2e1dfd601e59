"""The field types of signed metadata: each parses its wire string totally, or refuses with a reason.

Safetensors metadata is a flat map of strings, so every typed value travels as text. A field type
here is an ``Annotated`` type whose parser takes the wire string (or, for a writer building a
message, the typed value itself) and whose serializer gives the string back, so
``parse(wire(m)) == m``. The parsers are strict where peers could be hostile: ASCII digits and
lowercase hex matched whole (``fullmatch``: no sign, no space, no trailing newline, no digits of
other scripts), bounded lengths before any conversion, finite numbers only, and JSON parsed with
its depth, size, literals and keys bounded. A value that fails raises ``FieldError`` with the
reason code of its refusal, which the schema reports as ``Rejected``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from bittensor.sp_core import ss58_decode
from pydantic import BeforeValidator, PlainSerializer
from pydantic_core import PydanticCustomError

from subnet.wire.reasons import Reason

MAX_ENTRIES = 4096  # hotkeys in one JSON map: far above a subnet's 256 UIDs
MAX_NUMBER_CHARS = 64  # a JSON number literal longer than this is an attack, not a value
MAX_COUNT = 10**12 - 1  # a count of samples, tokens or steps: 12 digits at most
HEX64 = re.compile(r"[0-9a-f]{64}")
FRESH = "fresh"  # the training state of a trainer with no moments and no error feedback yet
_DIGITS = re.compile(r"[0-9]{1,12}")
_DECIMAL = re.compile(r"-?[0-9]{1,20}(?:\.[0-9]{1,20})?(?:[eE][-+]?[0-9]{1,3})?")
ERROR_PREFIX = "beam:"  # pydantic error types that carry a Reason value


class FieldError(ValueError):
    """A field value refused; ``reason`` is its refusal code."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason, self.detail = reason, detail


def _pydantic(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``parse`` as a pydantic validator: a ``FieldError`` becomes an error typed by its reason."""

    def validate(value: Any) -> Any:
        try:
            return parse(value)
        except FieldError as error:
            raise PydanticCustomError(ERROR_PREFIX + error.reason.value, error.detail) from None

    return validate


def _show(value: object) -> str:
    return repr(value)[:40]


def count(reason: Reason, value: object, *, low: int = 0, high: int = MAX_COUNT) -> int:
    """A count written as 1-12 ASCII digits (or an int), within ``[low, high]``."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and _DIGITS.fullmatch(value):
        number = int(value)
    else:
        raise FieldError(reason, f"{_show(value)} is not 1-12 ASCII digits")
    if not low <= number <= high:
        raise FieldError(reason, f"{number} outside [{low}, {high}]")
    return number


def decimal(reason: Reason, value: object, *, low: float, high: float) -> float:
    """A finite decimal number within ``[low, high]``, written as plain ASCII (or a float)."""
    if type(value) is float:
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value):
        number = float(value)
    else:
        raise FieldError(reason, f"{_show(value)} is not a decimal number")
    if not math.isfinite(number) or not low <= number <= high:
        raise FieldError(reason, f"{number} is not finite within [{low}, {high}]")
    return number


def hex64(reason: Reason, value: object) -> str:
    """64 lowercase hex characters (a sha256 digest)."""
    if not isinstance(value, str) or not HEX64.fullmatch(value):
        raise FieldError(reason, f"{_show(value)} is not 64 lowercase hex characters")
    return value


def is_ss58(key: object) -> bool:
    """Whether ``key`` is a valid ss58 address (checksum included)."""
    if not isinstance(key, str) or not 40 <= len(key) <= 60:
        return False
    try:
        ss58_decode(key)
    except (ValueError, TypeError):
        return False
    return True


class Pairs(list):
    """A JSON object as its list of pairs (so duplicate keys stay visible)."""


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: signed bytes that parsers may read two ways
    (most keep the last value, some the first)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key[:60]!r} appears twice")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object as a dict, ``DuplicateKey`` if a key
    repeats."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise FieldError(Reason.NOT_JSON, f"{name} is not a JSON number")


def _number(reason: Reason) -> Callable[[str], float | int]:
    def parse(literal: str) -> float | int:
        # Bounded before conversion: int() refuses past 4,300 digits only after the work, and
        # float("1e999") is inf; both are refused here with the field's reason.
        if len(literal) > MAX_NUMBER_CHARS:
            raise FieldError(reason, f"a {len(literal)}-character number")
        value = float(literal) if any(c in literal for c in ".eE") else int(literal)
        if isinstance(value, float) and not math.isfinite(value):
            raise FieldError(reason, f"{literal[:20]} is not finite")
        return value

    return parse


def load_json(text: object, max_chars: int, number_reason: Reason) -> object:
    """Parse hostile JSON: bounded text, no NaN/Infinity literals, bounded number literals,
    objects as ``Pairs``; ``FieldError`` (not_text, too_long, not_json, too_deep) otherwise."""
    if not isinstance(text, str):
        raise FieldError(Reason.NOT_TEXT, type(text).__name__)
    if len(text) > max_chars:
        raise FieldError(Reason.TOO_LONG, f"{len(text)} characters > {max_chars}")
    number = _number(number_reason)
    try:
        hooks = {"parse_int": number, "parse_float": number, "parse_constant": _no_constant}
        return json.loads(text, object_pairs_hook=Pairs, **hooks)
    except RecursionError:
        raise FieldError(Reason.TOO_DEEP, "nested beyond the parser's limit") from None
    except FieldError:
        raise
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise FieldError(Reason.NOT_JSON, str(exc)[:120]) from None


def hotkey_map(text: object, max_chars: int, number_reason: Reason) -> list[tuple[str, object]]:
    """The ``(hotkey, value)`` pairs of a flat JSON object, bounded, keys unique and ss58."""
    raw = load_json(text, max_chars, number_reason)
    if not isinstance(raw, Pairs):
        raise FieldError(Reason.NOT_AN_OBJECT, type(raw).__name__)
    if len(raw) > MAX_ENTRIES:
        raise FieldError(Reason.TOO_MANY_ENTRIES, f"{len(raw)} > {MAX_ENTRIES}")
    seen: set[str] = set()
    for key, _ in raw:
        if key in seen:
            raise FieldError(Reason.DUPLICATE_KEY, key[:60])
        if not is_ss58(key):
            raise FieldError(Reason.BAD_KEY, repr(key[:60]))
        seen.add(key)
    return list(raw)


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, finite numbers only)."""
    return json.dumps(value, sort_keys=True, allow_nan=False)


@dataclass(frozen=True)
class Wire:
    """A field's wire form and bounds, and the codes beyond its own it may be refused with
    (the docs' field table: ``scripts/wire_reference.py``)."""

    doc: str
    reasons: tuple[Reason, ...] = ()


def field(
    parse: Callable[[Any], Any], base: Any, doc: str, wire: Callable[[Any], str] = str
) -> Any:
    """An ``Annotated`` field type: parsed by ``parse``, written back by ``wire``."""
    return Annotated[base, BeforeValidator(_pydantic(parse)), PlainSerializer(wire), Wire(doc)]


def json_field(
    parse: Callable[[Any], Any],
    base: Any,
    doc: str,
    reasons: tuple[Reason, ...] = (),
    wire: Callable[[Any], str] = dumps,
) -> Any:
    """A field whose wire form is JSON text; a writer may give the typed value itself."""

    def either(value: Any) -> Any:
        return parse(value if isinstance(value, str) else wire(value))

    validators = (BeforeValidator(_pydantic(either)), PlainSerializer(wire))
    return Annotated[(base, *validators, Wire(doc, reasons))]
