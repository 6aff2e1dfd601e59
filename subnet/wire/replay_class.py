"""A replay class as text (``platform/precision/software``): its grammar, parsed whole.

What a class means and how a machine finds its own is ``subnet.verify.classes``; the wire reads
it here, in a gradient's ``replay_class`` and a notice's ``covers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16")
MAX_CLASS_CHARS = 120
_PART = r"[a-z0-9][a-z0-9.+_-]{0,79}"
_CLASS = re.compile(rf"({_PART})/(fp32|bf16)/({_PART})")


@dataclass(frozen=True, order=True)
class ReplayClass:
    """One class: ``platform/precision/software`` (what each part names: ``subnet.verify.classes``)."""

    platform: str
    precision: str
    software: str

    def __str__(self) -> str:
        return f"{self.platform}/{self.precision}/{self.software}"

    @classmethod
    def parse(cls, text: object) -> ReplayClass:
        """The class ``text`` names; ``ValueError`` unless it is one, whole."""
        if not isinstance(text, str) or len(text) > MAX_CLASS_CHARS:
            raise ValueError(f"a replay class is text of at most {MAX_CLASS_CHARS} characters")
        match = _CLASS.fullmatch(text)
        if match is None:
            raise ValueError(f"{text[:60]!r} is not platform/fp32|bf16/software")
        return cls(*match.groups())

    @property
    def bf16(self) -> bool:
        """Whether forward passes run under bf16 autocast."""
        return self.precision == "bf16"
