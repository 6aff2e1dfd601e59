"""The miner: train H inner steps on the assigned samples, upload the compressed pseudo-gradient.

Its one action, ``train`` (phase ``upload``, gate ``version_out``: the previous merge is out),
syncs to the model version the holder published, trains on the samples the plan's data rule
names (``assigned``: a pure function of seed, window and hotkey), computes ``start - end``, adds
its error feedback, compresses (SparseLoCo by default) and writes one signed envelope,
write-once, to its own bucket on the step's lane. The envelope carries the base model version,
the plan digest (in its signed header) and a receipt of the sample ids, so validators can check
all three. It paces
itself against the upload deadline (``pacer.py``): all steps, a credited prefix of at least
``inner.min_steps``, or an early skip, never a silent late upload.

A miner may advance several models (``lines.py``): each ``train`` step trains the model of the
lane it reads, with that step's data rule and settings, and keeps each model's optimizer and
error feedback apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from loguru import logger

from ..compression import ErrorFeedback, build_compressor, payload_nbytes
from ..config import ConfigError
from ..data import sample_receipt
from ..monitor.progress import progress
from ..storage.base import StorageError
from ..storage.keys import ObjectKind
from ..training import pseudo_gradient
from ..training.trainer import Trainer
from ..verify.classes import accepted, of_machine
from ..wire.schema import GradientMeta
from .actions.ring import mix, publish_model
from .actions.tree import reduce
from .answers import KEEP, Held, beacon, chunk_map, named_by, write_answer
from .base import BaseNeuron
from .bindings import precision
from .commits import Sealed, seal, write_commit, write_reveal
from .gates import GATES
from .lines import Line, build_lines, stream_of
from .pacer import Pacer, WindowSkipped  # noqa: F401 (WindowSkipped: re-exported)
from .replica import Replica
from .rules import DATA_CHECKS, DATA_RULES, STOP_RULES
from .state import (
    load_optimizer_state,
    optimizer_state,
    optimizer_steps,
    prefixed,
    unprefixed,
)
from .steps import Action, MixParams, ReduceParams, Step, StepParams, TrainParams
from .upload import Upload

# Error feedback of recent uploads, kept for answers to checks, in a miner's state file:
# ``held:<lane>:<window>:before/...`` and ``...:after/...``
_HELD = "held"
# Windows after which a training state is not continued: the upload that committed to it may
# have expired from the bucket (docs/miner.md suggests 7 days: 1,680 six-minute windows).
MAX_STATE_AGE = 1000


class NonFinite(ArithmeticError):
    """Local training diverged (a NaN or infinite loss or update)."""

    reason = "non_finite"


class Miner(BaseNeuron):
    """Trains and uploads; keeps its AdamW state and error feedback across windows."""

    role = "miner"

    def __init__(self, rt) -> None:
        super().__init__(rt)
        self.pacer = Pacer(rt)  # the upload deadline in seconds, and how much work fits

    def observe(self, tick: int, window: int, offset: int) -> None:
        self.pacer.observe(tick)  # measures the tick (block) time
        # A reveal that failed, or one a stall or restart let pass, goes out late: nobody pays
        # it now, but a check named for it is still owed (validators read it a window later)
        # and the next upload's state continues its committed state.
        for sealed in [s for s in self.sealed.values() if s.pending or s.window < window]:
            self.settle(sealed, last_chance=sealed.window < window - 1)
        if getattr(self, "held", None) is not None:
            self.answer_checks(window, offset)

    def settle(self, sealed: Sealed, last_chance: bool = False) -> None:
        """Reveal ``sealed`` now; if that fails on the ``last_chance`` (two windows on, or
        before training a later window), drop it and start its line over: no later upload
        could continue a state committed in an upload nobody can read."""
        if self.send_reveal(sealed) or not last_chance:
            return
        del self.sealed[sealed.lane]
        held = self.held.pop((sealed.lane, sealed.window), None)
        logger.warning(
            "window {}: the upload committed on {} was never revealed; its model "
            "line starts over with fresh training state",
            sealed.window,
            sealed.lane,
        )
        if held is not None and held[0] in self.lines:
            self.lines[held[0]].start_over(self.rt.cfg.protocol.compression.ef_decay)

    def setup(self) -> None:
        """The dataset (NotReady until the holder published it), each model line's replica,
        optimizer and error feedback."""
        p = self.rt.cfg.protocol
        self.data = self.rt.dataset()
        self.lines: dict[str, Line] = build_lines(self.rt, self.slot, self.data.vocab_size)
        self.line = next(iter(self.lines.values()))  # the model of the step at hand
        for rule in {line.data_rule for line in self.lines.values()} & set(DATA_CHECKS):
            DATA_CHECKS[rule](self.rt, self.data)  # ConfigError: this run cannot feed its trainers
        self.compressor = build_compressor(p.compression)
        self.trainer = Trainer(self.rt.cfg.node.parallel)  # one process, or rank 0 of torchrun
        self.sync_seconds = 0.0
        self.train_record: dict[str, Any] = {}  # the window's train metrics, logged on upload
        self.trained: Upload | None = None  # this window's update, for a later step (reduce, mix)
        self.trained_window = -1
        self.sealed: dict[str, Sealed] = {}  # lane -> the upload committed to, not yet revealed
        # (lane, window) -> (stream, its error feedback before and after): kept ``KEEP`` windows
        # for answers to checks (``answers.py``)
        self.held: dict[tuple[str, int], tuple[str, Held]] = {}
        self.held_now: Held | None = None  # the states of the update ``step`` just made
        # the replay class its uploads state where they are checked (``subnet.verify.classes``)
        self.replay_class = self._class()
        self.coverage: dict[str, tuple[str, ...]] = {}  # validator -> classes its notice covers
        self.told: bool | None = None  # whether a validator covers this class, as last said

    def assigned(self, rule: str, window: int) -> Callable[[str], list[int]]:
        """``hotkey -> sample ids`` of ``window`` by data rule ``rule`` (a line's own, or the
        plan's for the members whose updates a tree node reduces)."""
        return DATA_RULES[rule](self.rt, self.data, window)

    @property
    def replica(self) -> Replica:
        """The current line's model (the one a later step of the window, reduce or mix, uses)."""
        return self.line.replica

    @property
    def ef(self) -> ErrorFeedback:
        """The current line's error feedback."""
        return self.line.ef

    @property
    def optimizer(self):
        """The current line's inner optimizer."""
        return self.line.optimizer

    def replica_of(self, step: Step) -> Replica:
        """The model ``step`` starts from (its model lane's line)."""
        return self.lines[stream_of(self.rt, self.slot, step.plan)].replica

    def train(self, step: Step) -> Upload | None:
        """The ``train`` action: sync, train, upload on the step's lane.

        Trains the line of the model lane the step reads. Without a lane the update is kept for
        a later step of the window (``reduce``); on a ``checkpoint`` lane the trained model goes
        out instead of the update (gossip).
        """
        self.line = self.lines[stream_of(self.rt, self.slot, step.plan)]
        for earlier in [s for s in self.sealed.values() if s.window < step.window]:
            self.settle(earlier, last_chance=True)  # out now, or dropped: the chain holds
        sealed = self.sealed.get(step.lane or "")
        if sealed is not None and sealed.window == step.window:
            # Restarted after committing: training again would make other bytes than the ones
            # committed to. Make sure the commit is out; the reveal step sends the envelope.
            logger.info(
                "window {}: already committed on {}; not training again", step.window, step.lane
            )
            write_commit(self.rt, sealed)
            return None
        if not self.line.keep_optimizer:
            self.line.fresh_optimizer()  # the step says: no inner state across rounds
        self.sync(step.window)
        upload = self.step(step.window)
        self.trained, self.trained_window = upload, step.window
        if step.lane is not None and self.held_now is not None:
            self.held[(step.lane, step.window)] = (self.line.stream, self.held_now)
        if step.lane is not None:
            # type(self): a subclass's publish (the benchmark's attackers) must not be bypassed
            publish = LANE_PUBLISHERS.get(self.rt.lane(step.lane).kind, type(self).publish)
            publish(self, step.window, upload, lane=step.lane)
        return upload

    def reveal(self, step: Step) -> Sealed | None:
        """The ``reveal`` action (a commit-reveal lane, after the deadline): write the upload
        committed to before it, exactly the bytes the commit names."""
        sealed = self.sealed.get(step.lane or "")
        if sealed is None or sealed.window != step.window:
            logger.info("window {}: nothing committed on {} to reveal", step.window, step.lane)
            return None
        return sealed if self.send_reveal(sealed) else None

    def send_reveal(self, sealed: Sealed) -> bool:
        """Write a committed upload; on a storage failure keep it to try again next tick (in
        ``observe``, while validators may still be waiting for it)."""
        try:
            written = write_reveal(self.rt, sealed)
        except StorageError as error:
            sealed.pending = True
            logger.warning(
                "window {}: revealing the upload failed ({}); trying again next tick",
                sealed.window,
                error.reason,
            )
            return False
        logger.info("uploaded {} ({})", sealed.key, "new" if written else "already there")
        self.rt.metrics.log("train", **sealed.record, **self.rt.meter.take())
        del self.sealed[sealed.lane]
        self.save()
        return True

    def answer_checks(self, window: int, offset: int) -> None:
        """Answer the checks validators named this miner for (``answers.py``): each held upload
        once revealed, after the guard tick, until ``KEEP`` windows have passed. A failed write is
        tried again at the next tick."""
        self.held = {k: h for k, h in self.held.items() if k[1] >= window - KEEP}
        guard = self.rt.cfg.protocol.window.upload_deadline + 1
        for (lane, held_window), (_, held) in self.held.items():
            unrevealed = lane in self.sealed and self.sealed[lane].window == held_window
            if held.answered or unrevealed or (held_window == window and offset <= guard):
                continue
            named = named_by(self.rt, held_window, held, self.coverage)
            self.tell_coverage()
            if not named:
                continue
            draw = beacon(self.rt, held_window)
            if draw is None:
                continue  # no pulse stored yet, or the chain did not answer: tried again next tick
            shapes = {k: tuple(v.shape) for k, v in held.after.items()}
            try:
                written = write_answer(self.rt, lane, held, draw, shapes)
            except StorageError as error:
                logger.warning(
                    "window {}: writing the answer to a check failed ({}); trying again next tick",
                    held_window,
                    error.reason,
                )
                continue
            held.answered = True
            logger.info("window {}: this upload is checked; wrote its answer", held_window)
            # What checks cost this miner, apart from its uploads (the run page's own line)
            self.rt.metrics.log("answered", window=held_window, lane=lane, bytes=written)
            self.save()

    reduce = reduce
    mix = mix
    actions: ClassVar[dict[str, Action]] = {
        "train": train,
        "reveal": reveal,
        "reduce": reduce,
        "mix": mix,
    }
    gates = GATES  # the conditions a step of the plan may wait for
    stop_rules = STOP_RULES
    params: ClassVar[Mapping[str, type[StepParams]]] = {
        "train": TrainParams,
        "mix": MixParams,
        "reduce": ReduceParams,
    }
    saved = ("lines", "sealed", "held")
    # what a window's steps hand each other (``trained`` for reduce or mix) is memory only
    rebuilt = (
        "pacer",
        "data",
        "line",
        "compressor",
        "trainer",
        "sync_seconds",
        "train_record",
        "trained",
        "trained_window",
        "held_now",
        "replay_class",
        "coverage",  # read again from the next notices
        "told",  # said again after a restart
    )

    def sync(self, window: int) -> None:
        """Move to the latest model version (the ``version_out`` gate waited for it)."""
        started = time.perf_counter()
        self.replica.sync()
        self.sync_seconds = time.perf_counter() - started

    def step(self, window: int) -> Upload:
        """Train H inner steps on the line's samples; the compressed pseudo-gradient."""
        p, line = self.rt.cfg.protocol, self.line
        inner = line.inner
        ids = self.assigned(line.data_rule, window)(self.rt.hotkey)
        start = self.replica.snapshot()
        before = line.ef.state_dict()
        if before and (line.state_window is None or window - line.state_window > MAX_STATE_AGE):
            # A state no upload committed to (an older state file), or one so old that its
            # upload may have expired from the bucket: no check could prove it
            line.start_over(p.compression.ef_decay)
            before = {}
        moments = optimizer_state(line.optimizer)[1] if line.keep_optimizer else {}
        carried = optimizer_steps(line.optimizer)  # 0 unless the plan keeps the inner state
        moments = {k: v.clone() for k, v in moments.items()}
        self.held_now = None
        batches = progress(
            self.data.batches(ids, inner.micro_batch),
            desc=f"window {window}",
            total=inner.steps * inner.accumulation,
            unit="batch",
        )
        try:
            paced = self.pacer.train(
                window, self.replica, batches, self.optimizer, train=self.trainer.train, inner=inner
            )
        except BaseException:
            # Steps taken and abandoned (a skip, a failed read, a lost rank) must not change
            # the state the next upload says it continues.
            self.rewind(line, moments)
            raise
        result = paced.result
        ids = ids[: result.steps * inner.micro_batch * inner.accumulation]  # trained prefix
        delta = pseudo_gradient(start, self.replica.model)
        if not math.isfinite(result.mean_loss) or not all(
            bool(d.isfinite().all()) for d in delta.values()
        ):
            # Diverged: uploading would only be rejected, and NaN moments would poison every
            # later window. Start the local optimizer and error feedback afresh instead.
            self.replica.reset()
            line.start_over(p.compression.ef_decay)
            raise NonFinite(f"window {window}: loss {result.mean_loss}; optimizer state reset")
        payload, _ = self.ef.compress(self.compressor, delta)
        self.replica.reset()  # the next window starts from the global model, not ours
        source = line.state_window if before else None
        chunks = chunk_map(self.rt, {k: tuple(v.shape) for k, v in start.items()})
        self.held_now = Held.of(chunks, window, source, before, line.ef.state_dict())
        line.state_window = window
        logger.info(
            "window {}: {} steps, loss {:.4f}, {} bytes",
            window,
            result.steps,
            result.mean_loss,
            payload_nbytes(payload),
        )
        # Logged after the upload (publish), so the record's bytes_up includes it.
        self.train_record = dict(
            window=window,
            steps=result.steps,
            tokens=result.tokens,
            loss=result.mean_loss,
            seconds=result.seconds,
            bytes=payload_nbytes(payload),
            version=self.replica.version,
            sync_seconds=round(self.sync_seconds, 3),
            steps_assigned=inner.steps,
            stopped=paced.stopped,
            model=line.stream,
            data_rule=line.data_rule,
            files=self.data.files_of(ids),  # the data files this window's samples came from
            carried_steps=carried,
            lr=inner.lr,
            weight_decay=inner.weight_decay,
        )
        # Built from the schema validators parse it with: what is signed reads one way only.
        if self.replay_class is None:  # set up before the runtime had its beacon
            self.replay_class = self._class()
        meta = GradientMeta(
            receipt=sample_receipt(ids),
            samples=len(ids),
            steps=result.steps,
            tokens=result.tokens,
            loss=round(result.mean_loss, 6),
            threads=self.threads(),
            ranks=self.trainer.world,
            replay_class=self.replay_class,
            **self.held_now.metadata(),
        )
        return Upload(payload, meta.wire())

    def threads(self) -> int | None:
        """The CPU threads an upload was trained on, which a validator's replay of it uses; said
        only where uploads are checked (a chain's beacon, checks on), so a room's miner may train
        on more than a check replays on (``MAX_THREADS``)."""
        if self.rt.beacon is None or not self.rt.cfg.protocol.scoring.checks:
            return None
        return torch.get_num_threads()

    def _class(self) -> str | None:
        """This miner's replay class, said only where uploads are checked (as ``threads``);
        refused at start if the protocol's ``scoring.classes`` does not accept it."""
        if self.rt.beacon is None or not self.rt.cfg.protocol.scoring.checks:
            return None
        cls = of_machine(self.rt.cfg.node.neuron.device, precision(self.rt))
        patterns = self.rt.cfg.protocol.scoring.classes
        if not accepted(cls, patterns):
            raise ConfigError(
                f"this miner trains in replay class {cls}, which the subnet does not accept "
                f"(scoring.classes: {', '.join(patterns)}): change --neuron.device or "
                "--neuron.precision, or the kernels' variables (docs/miner.md#mining-on-a-gpu)"
            )
        logger.info("miner: uploads state replay class {}", cls)
        return str(cls)

    def tell_coverage(self) -> None:
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

    def rewind(self, line: Line, moments: dict[str, torch.Tensor]) -> None:
        """Put the line's inner optimizer back to its ``moments`` before a window's training
        (none: a fresh optimizer, as every window starts with unless the plan keeps them)."""
        line.fresh_optimizer()
        if moments:
            groups, _ = optimizer_state(line.optimizer)
            load_optimizer_state(line.optimizer, groups, moments)

    def publish(self, window: int, result: Upload, lane: str | None = None) -> None:
        """Sign and write the upload once to our bucket (on a commit-reveal lane: only the
        commit to it now; the ``reveal`` step writes the upload after the deadline)."""
        if lane is not None and self.rt.lane(lane).commit_reveal:
            sealed = seal(
                self.rt, window, lane, result.payload, self.replica.version, result.metadata
            )
            sealed.record = self.train_record
            self.sealed[lane] = sealed
            self.save()  # on disk before any commit to it: a restart reveals these very bytes
            write_commit(self.rt, sealed)
            result.key = sealed.key
            self.pacer.uploaded(window)  # the commit is what the deadline is for
            return
        key, written = self.rt.outbox(lane).publish(
            ObjectKind.GRADIENT,
            window,
            result.payload,
            metadata=result.metadata,
            base_version=self.replica.version,
        )
        result.key = key
        logger.info("uploaded {} ({})", key, "new" if written else "already there")
        self.log_train()
        self.pacer.uploaded(window)  # warns and records when it landed late

    def log_train(self) -> None:
        """The window's ``train`` record, written once its update (a gradient, a tree partial,
        a gossip model) went out, so the record's ``bytes_up`` includes it."""
        self.rt.metrics.log("train", **self.train_record, **self.rt.meter.take())

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Per line: model at its version (a gossip worker's own mixed model), error feedback,
        AdamW. The first line keeps the unprefixed names (a one-model miner's state file)."""
        meta: dict[str, Any] = {"lines": {}}
        tensors: dict[str, torch.Tensor] = {}
        for i, (stream, line) in enumerate(self.lines.items()):
            groups, moments = optimizer_state(line.optimizer)
            head = "" if i == 0 else f"{stream}:"
            tensors |= {
                **prefixed(line.replica.state or {}, head + "model"),
                **prefixed(line.ef.state_dict(), head + "ef"),
                **prefixed(moments, head + "adamw"),
            }
            record = {
                "version": line.replica.version,
                "adamw_groups": groups,
                "state_window": line.state_window,
            }
            if i == 0:
                meta |= record
            else:
                meta["lines"][stream] = record
        # Committed, not yet revealed: a restart before the reveal still sends these bytes.
        meta["sealed"] = {lane: s.meta() for lane, s in self.sealed.items()}
        for lane, s in self.sealed.items():
            tensors[f"sealed:{lane}"] = torch.frombuffer(bytearray(s.blob), dtype=torch.uint8)
        # ... and the error feedback answers to checks of recent uploads need
        meta["held"] = []
        for (lane, window), (stream, held) in self.held.items():
            meta["held"].append({"lane": lane, "stream": stream, **held.record()})
            tensors |= held.tensors(f"{_HELD}:{lane}:{window}")
        return meta, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        for i, (stream, line) in enumerate(self.lines.items()):
            head = "" if i == 0 else f"{stream}:"
            record = meta if i == 0 else meta.get("lines", {}).get(stream, {})
            line.replica.restore(record.get("version"), unprefixed(tensors, head + "model"))
            line.ef.load_state_dict(unprefixed(tensors, head + "ef"))
            load_optimizer_state(
                line.optimizer, record.get("adamw_groups", []), unprefixed(tensors, head + "adamw")
            )
            window = record.get("state_window")
            line.state_window = None if window is None else int(window)
        self.sealed = {
            lane: Sealed.load(m, tensors[f"sealed:{lane}"])
            for lane, m in meta.get("sealed", {}).items()
            if f"sealed:{lane}" in tensors
        }
        self.held = {}
        saved = meta.get("held", [])
        for m in saved if isinstance(saved, list) else []:  # (protocol 5 kept a dict: dropped)
            held = Held.load(m, tensors, f"{_HELD}:{m['lane']}:{m['window']}")
            self.held[(str(m["lane"]), held.window)] = (str(m["stream"]), held)


# How ``train`` sends on a lane, by the lane's object kind (default: the update, signed).
LANE_PUBLISHERS: dict[str, Action] = {ObjectKind.CHECKPOINT.value: publish_model}
