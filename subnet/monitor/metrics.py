"""One jsonl file of structured metrics per neuron, appended as events happen."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol


class Mirror(Protocol):
    """Another destination for the same records (W&B)."""

    def log(self, event: str, fields: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class MetricsSink:
    """Appends ``{"t": unix time, "event": name, **fields}`` lines to ``path``."""

    def __init__(
        self, path: str | Path, mirrors: list[Mirror] | None = None, **static: Any
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.static = static
        self.mirrors = list(mirrors or [])

    def log(self, event: str, **fields: Any) -> None:
        """Write one record; values must be JSON-serialisable (no secrets, by construction)."""
        record = {"t": round(time.time(), 3), "event": event, **self.static, **fields}
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        for mirror in self.mirrors:
            mirror.log(event, fields)

    def close(self) -> None:
        """Close the mirrors (the jsonl file needs nothing)."""
        for mirror in self.mirrors:
            mirror.close()
