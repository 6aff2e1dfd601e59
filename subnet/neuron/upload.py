"""``Upload``: one window's contribution of a trainer, ready to sign (the ``train`` result)."""

from __future__ import annotations

from dataclasses import dataclass

from ..compression import Payload


@dataclass
class Upload:
    """One window's contribution, ready to sign (the ``train`` action's result)."""

    payload: Payload
    metadata: dict[str, str]
    key: str | None = None  # where it was written, once published
