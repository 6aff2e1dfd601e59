"""A validator's check notice: one small signed object per window, on the scores lane.

It says whose uploads of that window the validator checks (``targets``: the senders then
write their answers) and how the checks it finished since its last notice came out
(``verdicts``). Miners read the notices to know when to answer; validators read each other's
to learn who is verified and which failures to confirm. Every field is parsed totally here:
a notice that does not parse is refused whole, and costs its sender its say, nobody else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TARGETS = 8
MAX_VERDICTS = 32
HOTKEY = re.compile(r"[1-9A-HJ-NP-Za-km-z]{40,60}")
WINDOW = re.compile(r"[0-9]{1,12}")
NUMBER = re.compile(r"inf|[0-9]{1,12}(\.[0-9]{1,12})?(e[-+]?[0-9]{1,3})?")
RESULTS = frozenset({
    "pass", "check_mismatch", "check_codec", "check_non_finite", "check_bad_answer",
    "check_bad_proof", "check_steps", "check_broken_chain", "check_unanswered",
    "check_unrevealed",
})  # fmt: skip


class BadNotice(ValueError):
    """A notice whose fields do not parse."""


@dataclass(frozen=True)
class Verdict:
    """How one check came out: ``result`` is ``pass`` or the failure's reason code."""

    window: int
    hotkey: str
    result: str
    error: float

    @property
    def ok(self) -> bool:
        """Whether the upload passed."""
        return self.result == "pass"


@dataclass(frozen=True)
class Notice:
    """What a notice says."""

    targets: tuple[str, ...]
    verdicts: tuple[Verdict, ...]

    def metadata(self) -> dict[str, str]:
        """The notice as signed metadata."""
        return {
            "targets": ",".join(self.targets),
            "verdicts": ";".join(
                f"{v.window},{v.hotkey},{v.result},{v.error:.6g}" for v in self.verdicts
            ),
        }


def parse_notice(metadata: dict[str, str]) -> Notice:
    """The notice in ``metadata``; :class:`BadNotice` if any field does not parse."""
    if set(metadata) - {"targets", "verdicts", "plan"}:
        raise BadNotice(f"unknown fields {sorted(set(metadata) - {'targets', 'verdicts', 'plan'})}")
    raw_targets = metadata.get("targets", "")
    targets = tuple(t for t in raw_targets.split(",") if t) if raw_targets else ()
    if len(targets) > MAX_TARGETS or not all(HOTKEY.fullmatch(t) for t in targets):
        raise BadNotice("targets: not a short list of hotkeys")
    verdicts = []
    raw = metadata.get("verdicts", "")
    entries = raw.split(";") if raw else []
    if len(entries) > MAX_VERDICTS:
        raise BadNotice(f"more than {MAX_VERDICTS} verdicts")
    for entry in entries:
        parts = entry.split(",")
        if len(parts) != 4:
            raise BadNotice(f"verdict {entry[:80]!r}: not window,hotkey,result,error")
        window, hotkey, result, error = parts
        if not WINDOW.fullmatch(window) or not HOTKEY.fullmatch(hotkey) or result not in RESULTS:
            raise BadNotice(f"verdict {entry[:80]!r}: a field that does not parse")
        if not NUMBER.fullmatch(error):
            raise BadNotice(f"verdict {entry[:80]!r}: error is not a non-negative number")
        verdicts.append(Verdict(int(window), hotkey, result, float(error)))
    return Notice(targets, tuple(verdicts))
