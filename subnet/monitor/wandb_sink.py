"""Weights & Biases, as a mirror of a neuron's metrics (off unless asked for).

``--wandb.mode offline`` writes runs under the run folder for a later ``wandb sync``;
``online`` streams them (needs ``WANDB_API_KEY`` in the environment); ``disabled`` (the
default: no telemetry ships unless an operator turns it on) never imports wandb.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from .. import __version__


def git_commit() -> str:
    """The checked-out commit of this package, or its version when not in a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except OSError:
        return __version__
    return out.stdout.strip() or __version__


class WandbSink:
    """Logs every numeric field of every metrics event as ``event/field``."""

    def __init__(
        self,
        *,
        mode: str,
        project: str,
        name: str,
        group: str,
        folder: Path,
        config: dict[str, Any],
    ) -> None:
        import wandb  # slow to import; only when W&B is on

        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            mode=mode,
            project=project,
            name=name,
            group=group,
            dir=str(folder),
            config={**config, "git_commit": git_commit()},
            reinit="finish_previous",
        )

    def log(self, event: str, fields: dict[str, Any]) -> None:
        """Mirror one metrics record (non-numeric fields stay in the jsonl only)."""
        data = {
            f"{event}/{k}": v
            for k, v in fields.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        if data:
            self.run.log(data)

    def close(self) -> None:
        """Finish the run (flushes offline files)."""
        self.run.finish()
