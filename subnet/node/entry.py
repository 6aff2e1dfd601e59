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


def run_role(role: type[BaseNeuron], description: str, argv: list[str] | None = None) -> int:
    """Parse flags, build the runtime, run the role until a signal or ``--neuron.max_windows``."""

    def main() -> int:
        cfg = parse_config(argv, prog=f"neurons/{role.role}.py", description=description,
                           role=role.role)  # fmt: skip
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
                neuron.run(max_windows=cfg.node.neuron.max_windows or None)
            except KeyboardInterrupt:  # a stop request while waiting for a block
                logger.info("{} stopped between windows", role.role)
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
