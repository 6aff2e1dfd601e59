"""Write the docs' tables of refusal codes and signed fields from the code (so they cannot drift).

python scripts/wire_reference.py            # rewrite the generated blocks in docs/
python scripts/wire_reference.py --check    # exit 1 if one is out of date

Three blocks, each between ``<!-- BEGIN generated: NAME ... -->`` and ``<!-- END generated:
NAME -->``: ``reasons`` in docs/protocol.md (every code of ``subnet.wire.Reason``), ``verdicts``
in docs/validator.md (the codes a validator's verdict detail can carry) and ``fields`` in
docs/reliability.md (every signed field, its wire form and bounds, and the code a bad value gets).
"""

from __future__ import annotations

import sys
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from subnet.room.invite import Invite, Leave, Redemption
from subnet.room.manifest import RoomManifest, RoomMember, RoomRun
from subnet.versions.manifest import ModelManifest
from subnet.wire import SCHEMAS, Header, Reason
from subnet.wire.fields import Wire
from subnet.wire.reasons import PREFIXES, SECTIONS

DOCS = Path(__file__).resolve().parents[1] / "docs"
BEGIN = "<!-- BEGIN generated: {name} (python scripts/wire_reference.py) -->"
END = "<!-- END generated: {name} -->"

# What a header field that parses but is not what the reader expects is refused with
HEADER_MISMATCH = {
    "version": Reason.WRONG_VERSION,
    "run": Reason.WRONG_RUN,
    "kind": Reason.WRONG_KIND,
    "lane": Reason.WRONG_LANE,
    "window": Reason.WRONG_WINDOW,
    "sender": Reason.WRONG_SENDER,
    "base_version": Reason.WRONG_BASE_VERSION,
    "plan": Reason.WRONG_PLAN,
    "payload_bytes": Reason.SIZE_MISMATCH,
    "payload_sha256": Reason.DIGEST_MISMATCH,
}
# Signed documents that are not envelope metadata: the model, its reason, where it travels
DOCUMENTS: list[tuple[type[BaseModel], Reason, str]] = [
    (ModelManifest, Reason.BAD_MANIFEST, "a model manifest's `manifest` JSON"),
    (RoomManifest, Reason.MALFORMED, "a room manifest's body"),
    (RoomMember, Reason.MALFORMED, "each of its `members`"),
    (RoomRun, Reason.MALFORMED, "each of its `runs`"),
    (Invite, Reason.MALFORMED, "an invite's body"),
    (Redemption, Reason.MALFORMED, "a redemption's body"),
    (Leave, Reason.MALFORMED, "a leave's body"),
]
VERDICT_SECTIONS = 5  # the envelope, metadata, payload, upload and checks sections


def _code(reason: Reason) -> str:
    return f"`{reason.value}`"


def reasons_table() -> str:
    """Every code of the enum, by who refuses with it, and the composite codes."""
    out: list[str] = []
    for title, members in SECTIONS.items():
        out += [f"**{title[0].upper()}{title[1:]}**", "", "| code | meaning |", "|---|---|"]
        out += [f"| {_code(r)} | {r.doc} |" for r in members]
        out.append("")
    out += ["**Composite codes** (a context, then a code above)", "", "| prefix | meaning |"]
    out += ["|---|---|", *(f"| `{p}` | {doc} |" for p, doc in PREFIXES.items())]
    return "\n".join(out)


def verdicts_table() -> str:
    """The codes a validator's ``rejected`` verdict names in its detail."""
    out = ["| source | codes |", "|---|---|"]
    for title, members in list(SECTIONS.items())[:VERDICT_SECTIONS]:
        out.append(f"| {title} | {', '.join(_code(r) for r in members)} |")
    out.append("| a commit | `commit_<code>` |")
    return "\n".join(out)


def _name(tp: Any) -> str:
    """A plain-words name of a field's type."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:  # an item's own bounds (a list of patterned strings)
        inner = [b for a in args[1:] if isinstance(a, FieldInfo) for b in _bounds(a.metadata)]
        return f"{_name(args[0])} ({'; '.join(inner)})" if inner else _name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return f"list of {_name(args[0])}"
    if origin is dict:
        return "JSON object"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"`{tp.__name__}`"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of the object kinds"
    names = {int: "integer", float: "finite number", str: "string", bool: "boolean"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _bounds(metadata: list[Any]) -> list[str]:
    words = {at.Ge: ("ge", ">="), at.Gt: ("gt", ">"), at.Le: ("le", "<="), at.Lt: ("lt", "<")}
    out = []
    for item in metadata:
        for kind, (attr, sign) in words.items():
            if isinstance(item, kind):
                value = getattr(item, attr)
                out.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        if isinstance(item, at.MinLen):
            out.append(f"at least {item.min_length:,} long")
        if isinstance(item, at.MaxLen):
            out.append(f"at most {item.max_length:,} long")
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            out.append(f"matches `{pattern.strip('^$')}` whole")
    return out


def _wire(tp: Any) -> Wire | None:
    for item in getattr(tp, "__metadata__", ()):
        if isinstance(item, Wire):
            return item
    for arg in typing.get_args(tp):
        found = _wire(arg) if arg is not tp else None
        if found is not None:
            return found
    return None


def _rows(model: type[BaseModel], reason_of: typing.Callable[[str], str]) -> list[str]:
    hints = typing.get_type_hints(model, include_extras=True)
    rows = []
    for name, info in model.model_fields.items():
        wire = _wire(hints[name])
        if wire is not None:
            form = wire.doc
            extra = [_code(r) for r in wire.reasons]
        else:
            form = "; ".join([_name(hints[name]), *_bounds(info.metadata)])
            extra = []
        if not info.is_required():
            form += " (optional)"
        codes = ", ".join(dict.fromkeys([reason_of(name), *extra]))
        rows.append(f"| `{name}` | {form} | {codes} |")
    return rows


def fields_table() -> str:
    """Every signed field: the header, each kind's metadata, and the signed documents."""
    head = ["| field | wire form and bounds | refused with |", "|---|---|---|"]
    out = ["**The signed header of every envelope** (unknown fields: `malformed_header`)", ""]
    out += head + _rows(
        Header, lambda n: f"`malformed_header`, {_code(HEADER_MISMATCH[n])} when not the expected"
    )
    by_schema: dict[type, list[str]] = {}
    for kind, schema in SCHEMAS.items():
        by_schema.setdefault(schema, []).append(f"`{kind.value}`")
    for schema, kinds in by_schema.items():
        if not schema.model_fields:
            out += ["", f"**{', '.join(kinds)}**: no metadata (any key: `{schema.REFUSAL.value}`)"]
            continue
        title = f"**Metadata of {', '.join(kinds)}** (`{schema.__name__}`; unknown key:"
        out += ["", f"{title} `{schema.REFUSAL.value}`)", ""] + head
        out += _rows(schema, lambda n, s=schema: _code(s.FIELD_REASONS.get(n, s.REFUSAL)))
    for model, reason, where in DOCUMENTS:
        out += ["", f"**{where}** (`{model.__name__}`; unknown field: {_code(reason)})", ""]
        out += head + _rows(model, lambda n, r=reason: _code(r))
    return "\n".join(out)


BLOCKS = {
    "reasons": (DOCS / "protocol.md", reasons_table),
    "verdicts": (DOCS / "validator.md", verdicts_table),
    "fields": (DOCS / "reliability.md", fields_table),
}


def render(text: str, name: str, table: str) -> str:
    """``text`` with its ``name`` block replaced by ``table``."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    if begin not in text or end not in text:
        raise ValueError(f"no {name} block ({begin} ... {end})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{table}\n{end}{tail}"


def main(argv: list[str]) -> int:
    stale = []
    for name, (path, table) in BLOCKS.items():
        text = path.read_text()
        new = render(text, name, table())
        if new != text:
            stale.append(str(path))
            if "--check" not in argv:
                path.write_text(new)
    if stale and "--check" in argv:
        print(f"out of date: {', '.join(stale)}; run python scripts/wire_reference.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
