"""Resumable neuron state: a JSON record plus named tensors, written atomically.

A neuron saves after every window it handles; after a restart it loads the same file and
resumes, so no window is handled twice and nothing accepted is lost. Tensors are stored with
safetensors (never pickle) next to the JSON record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import SetupError


class StateWriteError(SetupError):
    """The state could not be written (a full or read-only disk): the neuron stops with one
    line, since every window after this one would be lost on a restart."""


class StateFile:
    """``state.json`` and ``state.safetensors`` under one folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.meta_path = self.folder / "state.json"
        self.tensor_path = self.folder / "state.safetensors"

    def exists(self) -> bool:
        """Whether a state was saved before."""
        return self.meta_path.exists()

    def save(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Write tensors then the record, each via a temporary file and an atomic rename;
        StateWriteError (one line: where, why, what to do) when the disk refuses."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.tensor_path.with_suffix(".tmp")
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp))
            os.replace(tmp, self.tensor_path)
            tmp = self.meta_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(meta, indent=1, sort_keys=True))
            os.replace(tmp, self.meta_path)
        except (OSError, SafetensorError) as error:
            why = getattr(error, "strerror", None) or str(error).rsplit(": ", 1)[-1]
            raise StateWriteError(
                f"cannot save the neuron's state in {self.folder} ({why}); free space there or "
                "point --neuron.state_dir at a disk with room, then start again (it resumes "
                "from the last state saved)"
            ) from None

    def load(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """The saved record and tensors (empty when nothing was saved)."""
        if not self.exists():
            return {}, {}
        tensors = load_file(str(self.tensor_path)) if self.tensor_path.exists() else {}
        return json.loads(self.meta_path.read_text()), tensors


def prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """Namespace a tensor dict for storage alongside others (``model/``, ``ef/`` ...)."""
    return {f"{prefix}/{k}": v for k, v in tensors.items()}


def unprefixed(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The tensors saved under ``prefix`` by :func:`prefixed`, with the prefix removed."""
    head = prefix + "/"
    return {k[len(head) :]: v for k, v in tensors.items() if k.startswith(head)}


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """A torch optimizer's state as JSON (param groups) plus tensors (per-parameter moments)."""
    full = optimizer.state_dict()
    tensors = {
        f"{index}/{name}": value if torch.is_tensor(value) else torch.tensor(value)
        for index, entries in full["state"].items()
        for name, value in entries.items()
    }
    return full["param_groups"], tensors


def optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """Steps ``optimizer`` has taken so far (its largest per-parameter ``step``; 0 when fresh)."""
    steps = [int(entry["step"]) for entry in optimizer.state.values() if "step" in entry]
    return max(steps, default=0)


def load_optimizer_state(
    optimizer: torch.optim.Optimizer, groups: list[dict], tensors: dict[str, torch.Tensor]
) -> None:
    """Restore what :func:`optimizer_state` returned (nothing saved: keep a fresh optimizer)."""
    if not groups:
        return
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        index, name = key.split("/", 1)
        state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": groups})
