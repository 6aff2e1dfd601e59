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

The role is a composition; each part owns its state and says what of it is saved:

- ``lines.py``: each model line's replica, inner optimizer and error feedback;
- ``window_training.py``: a window's training of one line, paced, and its ``train`` record;
- ``reveals.py``: uploads committed to and not yet revealed (commit, then reveal);
- ``check_answers.py``: recent uploads' error feedback, and the answers to checks of them;
- ``replay_claim.py``: the replay class and threads its uploads state, and who covers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from loguru import logger

from ..compression import build_compressor
from ..data import sample_receipt
from ..storage.keys import ObjectKind
from ..training.trainer import Trainer
from ..wire.schema import GradientMeta
from .actions.ring import mix, publish_model
from .actions.tree import reduce
from .answers import Held
from .base import BaseNeuron
from .check_answers import AnswerBook
from .commits import Sealed, write_commit
from .gates import GATES
from .lines import Line, build_lines, lines_state, load_lines, stream_of
from .pacer import Pacer, WindowSkipped  # noqa: F401 (WindowSkipped: re-exported)
from .replay_claim import ReplayClaim, stated_threads
from .replica import Replica
from .reveals import Reveals, write_update
from .rules import DATA_CHECKS, DATA_RULES, STOP_RULES
from .runtime import Runtime
from .steps import Action, MixParams, ReduceParams, Step, StepParams, TrainParams
from .upload import Upload
from .window_training import MAX_STATE_AGE, NonFinite, Trained, WindowTraining

__all__ = ["MAX_STATE_AGE", "Miner", "NonFinite", "Upload", "WindowSkipped"]


class Miner(BaseNeuron):
    """Trains and uploads; keeps its AdamW state and error feedback across windows."""

    role = "miner"

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        self.pacer = Pacer(rt)  # the upload deadline in seconds, and how much work fits

    def observe(self, tick: int, window: int, offset: int) -> None:
        """Measure the tick time; send reveals owed; answer the checks named for this miner."""
        self.pacer.observe(tick)  # measures the tick (block) time
        # A reveal that failed, or one a stall or restart let pass, goes out late: nobody pays
        # it now, but a check named for it is still owed (validators read it a window later)
        # and the next upload's state continues its committed state.
        for sealed in self.reveals.due(window):
            self.settle(sealed, last_chance=sealed.window < window - 1)
        if getattr(self, "answers", None) is not None:
            self.answer_checks(window, offset)

    def settle(self, sealed: Sealed, last_chance: bool = False) -> None:
        """Reveal ``sealed`` now; if that fails on the ``last_chance`` (two windows on, or
        before training a later window), drop it and start its line over: no later upload
        could continue a state committed in an upload nobody can read."""
        if self.send_reveal(sealed) or not last_chance:
            return
        del self.sealed[sealed.lane]
        held = self.answers.drop(sealed.lane, sealed.window)
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
        self.data = self.rt.dataset()
        self.lines: dict[str, Line] = build_lines(self.rt, self.slot, self.data.vocab_size)
        self.line = next(iter(self.lines.values()))  # the model of the step at hand
        for rule in {line.data_rule for line in self.lines.values()} & set(DATA_CHECKS):
            DATA_CHECKS[rule](self.rt, self.data)  # ConfigError: this run cannot feed its trainers
        self.compressor = build_compressor(self.rt.cfg.protocol.compression)
        self.trainer = Trainer(self.rt.cfg.node.parallel)  # one process, or rank 0 of torchrun
        self.training = WindowTraining(self.rt, self.data, self.trainer, self.compressor)
        self.sync_seconds = 0.0
        self.train_record: dict[str, Any] = {}  # the window's train metrics, logged on upload
        self.trained: Upload | None = None  # this window's update, for a later step (reduce, mix)
        self.trained_window = -1
        self.reveals = Reveals(self.rt, self.save)
        self.answers = AnswerBook(self.rt, self.save)  # states of recent uploads, for checks
        self.held_now: Held | None = None  # the states of the update ``step`` just made
        # the replay class its uploads state where they are checked (``subnet.verify.classes``)
        self.claim = ReplayClaim(self.rt)

    @property
    def sealed(self) -> dict[str, Sealed]:
        """Lane -> the upload committed to, not yet revealed (``reveals.py``)."""
        return self.reveals.sealed

    @property
    def held(self) -> dict[tuple[str, int], tuple[str, Held]]:
        """(lane, window) -> (stream, its error feedback before and after), for answers."""
        return self.answers.held

    @held.setter
    def held(self, held: dict[tuple[str, int], tuple[str, Held]]) -> None:
        self.answers.held = held

    @property
    def replay_class(self) -> str | None:
        """The replay class this miner's uploads state (None where they are not checked)."""
        return self.claim.replay_class

    @replay_class.setter
    def replay_class(self, replay_class: str | None) -> None:
        self.claim.replay_class = replay_class

    def assigned(self, rule: str, window: int) -> Callable[[str], list[int]]:
        """``hotkey -> sample ids`` of ``window`` by data rule ``rule`` (a line's own, or the
        plan's for the members whose updates a tree node reduces)."""
        return DATA_RULES[rule](self.rt, self.data, window)

    @property
    def replica(self) -> Replica:
        """The current line's model (the one a later step of the window, reduce or mix, uses)."""
        return self.line.replica

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
        sealed = self.reveals.of(step.lane, step.window)
        if sealed is not None:
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
            self.answers.keep(step.lane, step.window, self.line.stream, self.held_now)
        if step.lane is not None:
            # type(self): a subclass's publish (the benchmark's attackers) must not be bypassed
            publish = LANE_PUBLISHERS.get(self.rt.lane(step.lane).kind, type(self).publish)
            publish(self, step.window, upload, lane=step.lane)
        return upload

    def reveal(self, step: Step) -> Sealed | None:
        """The ``reveal`` action (a commit-reveal lane, after the deadline): write the upload
        committed to before it, exactly the bytes the commit names."""
        sealed = self.reveals.of(step.lane, step.window)
        if sealed is None:
            logger.info("window {}: nothing committed on {} to reveal", step.window, step.lane)
            return None
        return sealed if self.send_reveal(sealed) else None

    def send_reveal(self, sealed: Sealed) -> bool:
        """Write a committed upload (``reveals.py``); False: kept to try again next tick."""
        return self.reveals.send(sealed)

    def answer_checks(self, window: int, offset: int) -> None:
        """Answer the checks validators named this miner for (``check_answers.py``)."""
        self.answers.answer(window, offset, self.reveals.unrevealed, self.claim)

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
    saved = ("lines", "reveals", "answers")
    # what a window's steps hand each other (``trained`` for reduce or mix) is memory only
    rebuilt = (
        "pacer",
        "data",
        "line",
        "compressor",
        "trainer",
        "training",
        "sync_seconds",
        "train_record",
        "trained",
        "trained_window",
        "held_now",
        "claim",  # the class said again after a restart; coverage read from the next notices
    )

    def sync(self, window: int) -> None:
        """Move to the latest model version (the ``version_out`` gate waited for it)."""
        started = time.perf_counter()
        self.replica.sync()
        self.sync_seconds = time.perf_counter() - started

    def step(self, window: int) -> Upload:
        """Train H inner steps on the line's samples; the compressed pseudo-gradient."""
        line = self.line
        ids = self.assigned(line.data_rule, window)(self.rt.hotkey)
        self.held_now = None
        trained = self.training.run(window, line, self.pacer, ids)
        self.held_now = trained.held
        # Logged after the upload (publish), so the record's bytes_up includes it.
        self.train_record = self.training.record(trained, line, self.sync_seconds)
        return Upload(trained.payload, self.gradient_meta(trained).wire())

    def gradient_meta(self, trained: Trained) -> GradientMeta:
        """The upload's signed metadata, built from the schema validators parse it with: what is
        signed reads one way only."""
        result, ids = trained.paced.result, trained.ids
        return GradientMeta(
            receipt=sample_receipt(ids),
            samples=len(ids),
            steps=result.steps,
            tokens=result.tokens,
            loss=round(result.mean_loss, 6),
            threads=self.threads(),
            ranks=self.trainer.world,
            replay_class=self.claim.stated(),
            **self.held_now.metadata(),
        )

    def threads(self) -> int | None:
        """The CPU threads an upload was trained on, said only where uploads are checked."""
        return stated_threads(self.rt)

    def publish(self, window: int, result: Upload, lane: str | None = None) -> None:
        """Sign and write the upload once to our bucket (on a commit-reveal lane: only the
        commit to it now; the ``reveal`` step writes the upload after the deadline)."""
        if lane is not None and self.rt.lane(lane).commit_reveal:
            sealed = self.reveals.commit(
                window, lane, result, self.replica.version, self.train_record
            )
            result.key = sealed.key
            self.pacer.uploaded(window)  # the commit is what the deadline is for
            return
        result.key = write_update(self.rt, window, result, self.replica.version, lane)
        self.log_train()
        self.pacer.uploaded(window)  # warns and records when it landed late

    def log_train(self) -> None:
        """The window's ``train`` record, written once its update (a gradient, a tree partial,
        a gossip model) went out, so the record's ``bytes_up`` includes it."""
        self.rt.metrics.log("train", **self.train_record, **self.rt.meter.take())

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Per line: model at its version, error feedback, AdamW (``lines.py``); the uploads
        committed to, not yet revealed (a restart before the reveal still sends these bytes);
        the error feedback answers to checks of recent uploads need."""
        meta, tensors = lines_state(self.lines)
        for part in (self.reveals, self.answers):
            own, own_tensors = part.state_dict()
            meta |= own
            tensors |= own_tensors
        return meta, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        load_lines(self.lines, meta, tensors)
        self.reveals.load_state_dict(meta, tensors)
        self.answers.load_state_dict(meta, tensors)


# How ``train`` sends on a lane, by the lane's object kind (default: the update, signed).
LANE_PUBLISHERS: dict[str, Action] = {ObjectKind.CHECKPOINT.value: publish_model}
