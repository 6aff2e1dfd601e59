"""The shared ``main`` of the three entry points in ``neurons/``.

Nothing heavy is imported before the flags are parsed: ``--help`` and a mistyped flag answer at
once, and torch, the chain SDK and the role's code load only for a neuron that will run.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
from typing import TYPE_CHECKING

from loguru import logger

from ..cli import parse_config, run_guarded
from ..errors import SetupError
from ..kernels import pin, replay_warning
from ..verify.classes import deterministic

if TYPE_CHECKING:
    from ..config import BeamConfig
    from ..neuron.base import BaseNeuron

# Role -> (module, class, the script a person runs).
ROLES: dict[str, tuple[str, str, str]] = {
    "miner": ("subnet.neuron.miner", "Miner", "neurons/miner.py"),
    "validator": ("subnet.neuron.validator", "Validator", "neurons/validator.py"),
    "holder": ("subnet.neuron.holder", "ModelHolder", "neurons/model_holder.py"),
}


def role_class(role: str) -> type[BaseNeuron]:
    """The neuron class of ``role`` (imported now)."""
    module, name, _ = ROLES[role]
    return getattr(importlib.import_module(module), name)


def run_until_stopped(neuron: BaseNeuron, max_windows: int | None) -> None:
    """``neuron.run``, where a stop request that interrupts the wait for a block is a clean stop.

    ``BaseNeuron.stop`` raises ``KeyboardInterrupt`` from the signal handler while the loop only
    waits. If that wait is inside a ``threading.Condition`` (the bittensor SDK's sync calls
    wait on a future), CPython can fail to re-acquire the condition's lock as the interrupt
    unwinds, and ``RuntimeError: cannot release un-acquired lock`` replaces it (seen at SIGTERM
    in the adversarial benchmark). After a stop request that is still a clean stop; any other
    ``RuntimeError`` propagates.
    """
    try:
        neuron.run(max_windows=max_windows)
    except KeyboardInterrupt:  # a stop request while waiting for a block
        logger.info(stopped_line(neuron))
    except RuntimeError:
        if not neuron.stop_event.is_set():
            raise
        logger.info(stopped_line(neuron))


def stopped_line(neuron: BaseNeuron) -> str:
    """What a stop while the loop waited left done: the last whole window, and the steps of
    the window in progress (a stop after a miner's commit is mid-window, not between windows)."""
    done = f"last whole window {neuron.last_window}" if neuron.last_window >= 0 else "no window"
    window, index = neuron.schedule.cursor.window, neuron.schedule.cursor.index
    steps = len(neuron.slot.steps)
    if window > neuron.last_window and 0 < index < steps:
        left = ", ".join(s.action for s in neuron.slot.steps[index:])
        return (
            f"{neuron.role} stopped while waiting, in window {window} after {index} of "
            f"{steps} steps ({left} not run); {done}"
        )
    return f"{neuron.role} stopped while waiting for the next window; {done}"


def hold_threads() -> None:
    """A checked miner on torch's default threads trains on at most ``MAX_THREADS`` of them: a
    validator replays its windows on as many (``preflight.check_threads``)."""
    import torch

    from ..wire.schema import MAX_THREADS

    own = torch.get_num_threads()
    if own > MAX_THREADS:
        torch.set_num_threads(MAX_THREADS)
        logger.info(
            "miner: training on {} of this machine's {} threads, the most a validator's check "
            "replays on (--neuron.threads)",
            MAX_THREADS,
            own,
        )


def _set_up_compute(cfg: BeamConfig, name: str, differ: list[str]) -> None:
    """Set torch's threads for the role, and say whether its kernels replay as a check needs."""
    import torch

    node = cfg.node
    if node.neuron.threads:
        torch.set_num_threads(node.neuron.threads)
    elif name == "miner" and not node.room and cfg.protocol.scoring.checks:
        hold_threads()
    if node.neuron.device == "cpu" and cfg.protocol.scoring.checks:
        why = replay_warning(torch.backends.cpu.get_cpu_capability(), differ)
        if why:
            logger.warning("{}: {}", name, why)
    elif cfg.protocol.scoring.checks:  # a GPU: its replay class is deterministic or nothing
        settings = deterministic(node.neuron.device)
        if settings:
            logger.info("{}: deterministic {} ({})", name, node.neuron.device, ", ".join(settings))


def run_role(role: type[BaseNeuron] | str, description: str, argv: list[str] | None = None) -> int:
    """Parse flags, build the runtime, run the role until a signal or ``--neuron.max_windows``.

    ``role``: a key of ``ROLES`` (its class is imported once the flags parsed), or a class.
    """
    name = role if isinstance(role, str) else role.role
    script = ROLES.get(name, ("", "", f"neurons/{name}.py"))[2]

    def main() -> int:
        differ = pin()  # before torch loads: the kernels validators replay on (subnet.kernels)
        cfg = parse_config(argv, prog=script, description=description, role=name)
        from ..training.distributed import RankFailure

        try:
            return start(cfg, differ)
        except RankFailure as error:
            logger.error("{} stopped: {}", name, error)
            return 1

    def start(cfg, differ: list[str]) -> int:
        from ..logs import setup_logging
        from ..preflight import preflight
        from ..training.distributed import launch, rank_suffix
        from .build import build_runtime

        preflight(cfg, name)  # local mistakes first, before any network call
        log, node = cfg.node.logging, cfg.node
        label = f"{name}-{node.wallet.name}-{node.wallet.hotkey}{rank_suffix()}"
        setup_logging(debug=log.debug, trace=log.trace, log_dir=log.dir, node=label)
        _set_up_compute(cfg, name, differ)
        cls = role_class(role) if isinstance(role, str) else role
        with launch(cfg.node.parallel, node.neuron.device, cfg.protocol.inner.micro_batch) as group:
            if group is not None and not group.is_main:
                return group.serve()  # ranks > 0 train rank 0's jobs; only rank 0 runs the loop
            neuron = cls(build_runtime(cfg, name))
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: neuron.stop())
            try:
                run_until_stopped(neuron, cfg.node.neuron.max_windows or None)
            except BaseException:
                with contextlib.suppress(SetupError):  # the error that stops it is the news
                    neuron.save()
                raise
            else:
                neuron.save()
            finally:
                neuron.rt.metrics.close()
        return 0

    return run_guarded(main)
