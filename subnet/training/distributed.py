"""One miner on many processes: rank 0 runs the neuron, ranks > 0 serve its training jobs.

Under ``torchrun --nproc_per_node N`` every rank starts the same entry point. :func:`launch`
joins the process group; rank 0 goes on to build the neuron (the only one that talks to the
chain and storage, and the only loop over clock ticks), while every other rank calls
:meth:`Group.serve` and blocks there. Each window rank 0's
:class:`~subnet.training.trainer.Trainer` sends one job:

1. a header (model config, step count, batch shape, whether AdamW has state yet),
2. the model's parameters and AdamW moments, broadcast from rank 0,
3. the window's micro-batches (inputs and targets); rank r trains on sequences ``r::N`` of each,

then every rank runs the same :func:`~subnet.training.inner.train_inner` on a DDP (or FSDP2)
wrapper of its copy, so gradients are averaged over ranks each micro-batch: with equal shards the
mean of the ranks' mean losses is the single-process mean loss, and the step is the single-process
step up to floating-point summation order. Rank 0's model ends holding the trained parameters, and
the miner computes the pseudo-gradient and error feedback from it once.

Two process groups: a ``control`` group (gloo, long timeout) on which idle ranks wait a whole
window for the next header, and a ``work`` group (gloo on CPU, NCCL on CUDA, short timeout) for the
job itself. A rank that dies breaks every collective; the others raise :class:`RankFailure`, which
the entry point turns into one log line and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from loguru import logger
from torch import nn

from subnet.errors import ConfigError
from subnet.model import ModelConfig, build_model
from subnet.training.config import InnerConfig
from subnet.training.inner import Batch, InnerResult, build_inner_optimizer, train_inner
from subnet.training.parallel import Engine, ParallelConfig, build_engine

_ACTIVE: Group | None = None


def active() -> Group | None:
    """The group :func:`launch` joined, while inside it; None otherwise."""
    return _ACTIVE


class RankFailure(BaseException):
    """A peer rank died or stopped answering: no window can run on a broken process group.

    A ``BaseException`` on purpose: the neuron loop logs and survives ordinary exceptions one window
    at a time, but this one must end the process (the entry point prints it as one line).
    """


@dataclass
class Group:
    """This process's place in a torchrun launch: rank, world size and the two process groups."""

    rank: int
    world: int
    device: str
    config: ParallelConfig
    control: object = None
    work: object = None
    _model: nn.Module | None = field(default=None, repr=False)
    _optimizer: torch.optim.Optimizer | None = field(default=None, repr=False)
    _compiled: tuple[nn.Module, nn.Module] | None = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        """True on rank 0, the rank that runs the neuron."""
        return self.rank == 0

    def serve(self) -> int:
        """Ranks > 0: train every job rank 0 sends until it sends stop; returns the exit status.

        SIGINT and SIGTERM are ignored here: torchrun and a terminal signal every rank at once,
        and rank 0 finishes its window (with this rank's help) before it sends stop.
        """
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
        logger.info("rank {}/{} serving training jobs", self.rank, self.world)
        try:
            while (header := self._receive_header()) is not None:
                self.run_job(header, None, None)
        except RankFailure as error:
            logger.error("rank {}: {}", self.rank, error)
            return 1
        logger.info("rank {} stopped", self.rank)
        return 0

    def _receive_header(self) -> dict | None:
        box: list = [None]
        collective(lambda: dist.broadcast_object_list(box, src=0, group=self.control), "a job")
        return None if box[0]["op"] == "stop" else box[0]

    def stop_workers(self) -> None:
        """Rank 0: tell the serving ranks to return (best effort: they may be gone already)."""
        with contextlib.suppress(RankFailure):
            collective(
                lambda: dist.broadcast_object_list([{"op": "stop"}], src=0, group=self.control),
                "stop",
            )

    def run_job(
        self,
        header: dict,
        model: nn.Module | None,
        optimizer: torch.optim.Optimizer | None,
        batches: torch.Tensor | None = None,
    ) -> InnerResult:
        """Every rank: receive state and data from rank 0, train its shard, agree on the result."""
        model, optimizer = self._local(header, model, optimizer)
        cfg = InnerConfig(**header["inner"])
        collective(lambda: _broadcast_state(model, optimizer, header, self.work), "model state")
        if batches is None:
            batches = torch.empty(header["shape"], dtype=torch.long, device=self.device)
        collective(lambda: dist.broadcast(batches, src=0, group=self.work), "batches")
        shards = _shard(batches, self.rank, self.world)
        engine = collective(
            lambda: build_engine(model, optimizer, cfg, self.config.mode, self.device, self.work),
            "the model wrapper",
        )
        module = self._maybe_compiled(engine)
        result = collective(
            lambda: train_inner(module, shards, cfg, engine.optimizer, averaged=True), "training"
        )
        stats = torch.tensor(
            [result.mean_loss, result.tokens], dtype=torch.float64, device=self.device
        )
        collective(lambda: dist.all_reduce(stats, group=self.work), "the loss")
        collective(lambda: engine.finish(model, optimizer), "the trained shards")
        return InnerResult(
            int(stats[1]), result.steps, stats[0].item() / self.world, result.seconds
        )

    def _local(
        self, header: dict, model: nn.Module | None, optimizer: torch.optim.Optimizer | None
    ) -> tuple[nn.Module, torch.optim.Optimizer]:
        """Rank 0 trains its own model and optimizer; serving ranks keep a copy of each."""
        if model is not None and optimizer is not None:
            return model, optimizer
        config = ModelConfig(**header["model"])
        if self._model is None or self._model.config != config:
            self._model = build_model(config, device=self.device)
        if self._optimizer is None or header["adam_steps"] is None:
            self._optimizer = build_inner_optimizer(self._model, InnerConfig(**header["inner"]))
        return self._model, self._optimizer

    def _maybe_compiled(self, engine: Engine) -> nn.Module:
        """``torch.compile`` the DDP module once per model (FSDP2 copies are fresh each job)."""
        if not self.config.compile or engine.sharded:
            return engine.module
        if self._compiled is None or self._compiled[0] is not engine.module:
            self._compiled = (engine.module, torch.compile(engine.module))
        return self._compiled[1]


def collective(fn, what: str):
    """Run a collective; a dead or silent peer becomes a one-line :class:`RankFailure`."""
    try:
        return fn()
    except (RuntimeError, dist.DistBackendError, ConnectionError) as error:
        raise RankFailure(
            f"a training rank stopped answering while exchanging {what}: {_one_line(error)}"
        ) from None


def _one_line(error: BaseException) -> str:
    """gloo's and NCCL's messages without the source location and the advice paragraph."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)
    return text.split(". This is typically")[0]


def _shard(batches: torch.Tensor, rank: int, world: int) -> list[Batch]:
    """Sequences ``rank::world`` of every micro-batch [M, 2, B, T] as (inputs, targets) pairs."""
    mine = batches[:, :, rank::world]
    return [(m[0], m[1]) for m in mine]


def _broadcast_state(
    model: nn.Module, optimizer: torch.optim.Optimizer, header: dict, group: object
) -> None:
    """Rank 0's parameters and AdamW state onto every rank (in place, parameter order)."""
    params = list(model.parameters())
    with torch.no_grad():
        for p in params:
            dist.broadcast(p.data, src=0, group=group)
    steps = header["adam_steps"]
    if steps is None:
        optimizer.state.clear()
        return
    for p, step in zip(params, steps, strict=True):
        state = optimizer.state[p]
        if "exp_avg" not in state:
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] = torch.tensor(float(step))
        dist.broadcast(state["exp_avg"], src=0, group=group)
        dist.broadcast(state["exp_avg_sq"], src=0, group=group)


def world_size(environ: Mapping[str, str] | None = None) -> int:
    """Ranks in this launch: torchrun's ``WORLD_SIZE`` (in ``environ``, default this process's
    environment), 1 without torchrun."""
    env = os.environ if environ is None else environ
    return int(env.get("WORLD_SIZE", "1") or 1)


def rank_suffix() -> str:
    """``-rank<R>`` for ranks > 0 of a launch (their log names), else empty."""
    rank = int(os.environ.get("RANK", "0")) if world_size() > 1 else 0
    return f"-rank{rank}" if rank else ""


@contextlib.contextmanager
def launch(config: ParallelConfig, device: str, micro_batch: int) -> Iterator[Group | None]:
    """Join the torchrun process group when there is one (``WORLD_SIZE`` > 1), else yield None.

    On CUDA each rank uses ``cuda:LOCAL_RANK`` and NCCL. Leaving the block on rank 0 tells the serving
    ranks to stop; every rank then leaves the process group.

    Raises:
        ConfigError: ``micro_batch`` cannot be split evenly over the ranks.
    """
    global _ACTIVE
    world = world_size()
    if world <= 1:
        yield None
        return
    if micro_batch % world:
        raise ConfigError(
            f"--protocol.inner.micro_batch {micro_batch} cannot be split over {world} ranks; "
            f"run a number of ranks that divides it (torchrun --nproc_per_node)"
        )
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    backend = "gloo"
    if device.startswith("cuda"):
        gpus = torch.cuda.device_count()
        torch.cuda.set_device(local % gpus)
        device = f"cuda:{local % gpus}"
        # NCCL refuses two ranks on one GPU; ranks sharing one (a smoke test) fall back to gloo.
        backend = "nccl" if gpus >= int(os.environ.get("LOCAL_WORLD_SIZE", world)) else "gloo"
        if backend == "gloo":
            logger.warning("{} ranks share {} GPU(s): using gloo, not NCCL", world, gpus)
    work_timeout = datetime.timedelta(seconds=config.timeout_s)
    idle_timeout = datetime.timedelta(seconds=config.idle_timeout_s)

    def join() -> object:
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=work_timeout)
        return dist.new_group(backend="gloo", timeout=idle_timeout)

    control = collective(join, "the process group set-up")
    group = Group(rank, world, device, config, control=control, work=dist.group.WORLD)
    _ACTIVE = group
    try:
        yield group
    finally:
        if group.is_main:
            group.stop_workers()
        _ACTIVE = None
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
