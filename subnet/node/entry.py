"""The shared ``main`` of the three entry points in ``neurons/`` (subnet mode)."""

from __future__ import annotations

import signal

import torch
from loguru import logger

from ..cli import parse_config, run_guarded
from ..logs import setup_logging
from ..neuron.base import BaseNeuron
from ..preflight import preflight
from ..training.distributed import RankFailure, launch, rank_suffix
from .build import build_runtime


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
        logger.info("{} stopped between windows", neuron.role)
    except RuntimeError as error:
        if not neuron.stop_event.is_set():
            raise
        logger.info("{} stopped between windows ({})", neuron.role, error)


def run_role(role: type[BaseNeuron], description: str, argv: list[str] | None = None) -> int:
    """Parse flags, build the runtime, run the role until a signal or ``--neuron.max_windows``."""

    def main() -> int:
        cfg = parse_config(
            argv, prog=f"neurons/{role.role}.py", description=description, role=role.role
        )
        preflight(cfg, role.role)  # local mistakes first, before any network call
        log, node = cfg.node.logging, cfg.node
        name = f"{role.role}-{node.wallet.name}-{node.wallet.hotkey}{rank_suffix()}"
        setup_logging(debug=log.debug, trace=log.trace, log_dir=log.dir, node=name)
        if node.neuron.threads:
            torch.set_num_threads(node.neuron.threads)
        with launch(cfg.node.parallel, node.neuron.device, cfg.protocol.inner.micro_batch) as group:
            if group is not None and not group.is_main:
                return group.serve()  # ranks > 0 train rank 0's jobs; only rank 0 runs the loop
            neuron = role(build_runtime(cfg, role.role))
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: neuron.stop())
            try:
                run_until_stopped(neuron, cfg.node.neuron.max_windows or None)
            finally:
                neuron.save()
                neuron.rt.metrics.close()
        return 0

    def guarded() -> int:
        try:
            return main()
        except RankFailure as error:
            logger.error("{} stopped: {}", role.role, error)
            return 1

    return run_guarded(guarded)
