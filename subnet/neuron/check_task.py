"""A check a validator owes: what it waits for and what it cost (``subnet.neuron.checks``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .uploads import Received


@dataclass
class Task:
    """A check waiting for idle time."""

    window: int
    hotkey: str
    upload: Received | None  # None: committed and not revealed yet
    base: dict[str, torch.Tensor] = field(repr=False)
    claimant: str = ""  # a confirmation: the validator whose failure claim it replays
    commit: str = ""  # an upload committed and not revealed in time: the digest committed to
    link: tuple[int, str] | None = None  # only a link to read: (state_from, state_in)
    tries: int = 0
    bytes: int = 0  # the answer's payload, once read (what the check cost in downloads)
    spread: float | None = None  # the window's chaos as measured (``subnet.verify.check.spread``)
