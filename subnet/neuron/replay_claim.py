"""What a miner says about where its uploads can be replayed: its replay class, its threads,
and whether a validator covers that class (``subnet.verify.classes``, ``class_book``).

All of it is said only where uploads are checked (a chain's beacon, checks on); a room's miner
says none of it. The class is refused at start if the protocol's ``scoring.classes`` does not
accept it. Coverage is read from the validators' notices (``answers.named_by``) and said once,
and again whenever it changes.
"""

from __future__ import annotations

import torch
from loguru import logger

from ..config import ConfigError
from ..verify.classes import accepted, of_machine
from .bindings import precision
from .runtime import Runtime


def checked(rt: Runtime) -> bool:
    """Whether uploads are checked here (a chain's beacon, and checks on)."""
    return rt.beacon is not None and bool(rt.cfg.protocol.scoring.checks)


def stated_threads(rt: Runtime) -> int | None:
    """The CPU threads an upload was trained on, which a validator's replay of it uses; said
    only where uploads are checked, so a room's miner may train on more than a check replays on
    (``MAX_THREADS``)."""
    return torch.get_num_threads() if checked(rt) else None


def stated_class(rt: Runtime) -> str | None:
    """This machine's replay class, said only where uploads are checked; ConfigError if the
    protocol's ``scoring.classes`` does not accept it."""
    if not checked(rt):
        return None
    cls = of_machine(rt.cfg.node.neuron.device, precision(rt))
    patterns = rt.cfg.protocol.scoring.classes
    if not accepted(cls, patterns):
        raise ConfigError(
            f"this miner trains in replay class {cls}, which the subnet does not accept "
            f"(scoring.classes: {', '.join(patterns)}): change --neuron.device or "
            "--neuron.precision, or the kernels' variables (docs/miner.md#mining-on-a-gpu)"
        )
    logger.info("miner: uploads state replay class {}", cls)
    return str(cls)


class ReplayClaim:
    """The replay class a miner's uploads state, and which validators cover it (memory only:
    read again from the next notices, said again after a restart)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.replay_class = stated_class(rt)
        self.coverage: dict[str, tuple[str, ...]] = {}  # validator -> classes its notice covers
        self.told: bool | None = None  # whether a validator covers this class, as last said

    def stated(self) -> str | None:
        """The class an upload states now (stated afresh if set up before the beacon was)."""
        if self.replay_class is None:
            self.replay_class = stated_class(self.rt)
        return self.replay_class

    def tell(self) -> None:
        """Say, once and again whenever it changes, whether a validator whose notice this miner
        read covers its class: if none does, its uploads are held in probation (unpaid, never
        merged, never banned for it) until one that does joins (``class_book``)."""
        if self.replay_class is None or not self.coverage:
            return
        covered = any(self.replay_class in c for c in self.coverage.values())
        if covered == self.told:
            return
        self.told = covered
        self.rt.metrics.log("coverage", replay_class=self.replay_class, covered=covered)
        if covered:
            logger.info("miner: a validator checks class {}", self.replay_class)
        else:
            logger.warning(
                "miner: no validator replays class {}: its uploads are scored but unpaid until "
                "one that does joins (docs/miner.md#mining-on-a-gpu)",
                self.replay_class,
            )
