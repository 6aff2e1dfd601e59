"""One check of training, run: read the answer, replay the window, compare (``subnet.verify``).

The replay runs on a scratch model on the validator's own device, so it is exact only for the
replay classes that device covers (``class_book``); a late reveal of another class gets no
verdict. Reads of a miner's bucket are bounded by ``read_seconds``: ``READ_SHARE`` of a window as
last measured between idle periods, so a slow bucket costs a check its turn (the answer is owed),
never the validator its window. A mismatch beyond the fixed tolerance is measured against the
window's own chaos (a second replay, perturbed) before it fails (``scoring.check_margin``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from loguru import logger

from ..compression import Compressor
from ..data import TokenDataset
from ..model import build_model
from ..verify.answer import Answer, BadAnswer, parse_answer
from ..verify.check import Outcome, check, chunks_for, levels, spread, tolerance
from ..verify.chunks import FRESH, ChunkMap
from ..verify.classes import ReplayClass, covered
from ..verify.draw import chunk_sample
from . import check_reads as reads
from .answers import beacon, chunk_map, commitments
from .bindings import inner_config
from .check_ledger import CheckLedger
from .check_task import Task
from .class_book import ClassBook
from .replay import PROBE_NOISE, Replayer, ReplayShort
from .runtime import Runtime
from .uploads import Received

READ_SHARE, READ_MIN_S = 0.05, 5.0  # one read of a miner's bucket: 5 % of a window, >= 5 s


class CheckRunner:
    """Runs one validator's checks on one lane (the module doc); memory only."""

    def __init__(
        self,
        rt: Runtime,
        lane: str,
        book: ClassBook,
        ledger: CheckLedger,
        assigned_of: Callable[[int], Callable[[str], list[int]]],
    ) -> None:
        """``ledger``: where a check without a verdict is logged; ``assigned_of(window)``:
        ``hotkey -> sample ids`` by the plan's data rule."""
        self.rt, self.lane, self.book, self.ledger = rt, lane, book, ledger
        self.assigned_of = assigned_of
        self.replayer: Replayer | None = None
        self.window_seconds = 60.0  # a window's length, measured between idle periods
        self._last_idle: tuple[int, float] | None = None  # (window, when its idle time began)

    def setup(self, data: TokenDataset, compressor: Compressor) -> None:
        """The replayer (a scratch model on the validator's device), once the data is there;
        the classes this validator covers go in its ``book``."""
        p = self.rt.cfg.protocol
        model = build_model(p.model, vocab_size=data.vocab_size, seed=p.seed)
        self.data, self.compressor = data, compressor
        device = self.rt.cfg.node.neuron.device
        self.replayer = Replayer(model.to(device), inner_config(self.rt))
        self.book.covers = tuple(str(c) for c in covered(device, model, p.seq_len))
        logger.info("checks: this validator replays classes {}", ", ".join(self.book.covers))

    def idle_starts(self, window: int) -> None:
        """Idle time after ``window``'s report begins: a window's length, measured."""
        now = time.monotonic()
        if self._last_idle is not None and self._last_idle[0] == window - 1:
            self.window_seconds = now - self._last_idle[1]
        self._last_idle = (window, now)

    @property
    def read_seconds(self) -> float:
        """How long one read of a miner's bucket may hold a check: ``READ_SHARE`` of a window
        (as last measured between idle periods), at least ``READ_MIN_S``."""
        return max(READ_MIN_S, READ_SHARE * self.window_seconds)

    def check(self, task: Task) -> Outcome | None:
        """Read the answer (and a late reveal), replay, compare; None: a late reveal of a class
        this validator does not cover (no verdict)."""
        assert self.replayer is not None, "setup first"
        p = self.rt.cfg.protocol
        shapes = {k: tuple(v.shape) for k, v in task.base.items()}
        if task.upload is None:
            task.upload = self._late_reveal(task, shapes)
        upload = task.upload
        cls = self.book.of(upload.meta.replay_class)
        if not self.book.covered(cls):  # a late reveal in another class
            self.book.observe(task.hotkey, upload.meta.replay_class, task.window)
            self.ledger.not_covered(task.window, task.hotkey, cls)
            return None
        chunks, ids, answer = self._answer(task, upload, shapes)
        samples = self.assigned_of(task.window)(task.hotkey)[: upload.samples or None]
        batches = list(self.data.batches(samples, self.replayer.inner.micro_batch))
        # As many threads and ranks as the miner's, at its precision: reductions split as its did
        threads, ranks = upload.meta.threads, upload.meta.ranks or 1
        bf16 = ReplayClass.parse(cls).bf16
        try:
            delta = self.replayer.replay(
                task.base, batches, upload.steps, 0.0, threads, ranks, bf16
            )
        except ReplayShort as short:
            raise BadAnswer("check_steps", str(short)) from None
        outcome = self._compare(upload, chunks, ids, delta, answer, p.scoring.check_tolerance)
        if outcome.reason != "check_mismatch" or p.scoring.check_margin <= 0:
            return outcome
        # Beyond the fixed tolerance: is the window chaotic enough to explain it? A second
        # replay with perturbed gradients measures how far honest replays lie apart here.
        probe = self.replayer.replay(
            task.base, batches, upload.steps, PROBE_NOISE, threads, ranks, bf16
        )
        task.spread = spread(chunks, ids, delta, probe, answer.ef_in, p.compression.ef_decay)
        allowed = tolerance(p.scoring.check_tolerance, p.scoring.check_margin, task.spread)
        return self._compare(upload, chunks, ids, delta, answer, allowed)

    def _late_reveal(self, task: Task, shapes: dict[str, tuple[int, ...]]) -> Received:
        """The upload a named sender committed to and revealed late (``reads.Owed``: not yet)."""
        return reads.late_reveal(
            self.rt,
            self.lane,
            task.window,
            task.hotkey,
            task.commit,
            self.compressor,
            shapes,
            self.assigned_of(task.window),
            self.read_seconds,
        )

    def _answer(
        self, task: Task, upload: Received, shapes: dict[str, tuple[int, ...]]
    ) -> tuple[ChunkMap, list[int], Answer]:
        """The model's chunks, the ones the beacon draws for this check, and the sender's
        answer for them (its bytes counted in ``task.bytes``)."""
        p = self.rt.cfg.protocol
        draw = beacon(self.rt, task.window)
        if draw is None:
            raise reads.Owed("the chain gives no beacon now")
        chunks = chunk_map(self.rt, shapes)
        ids = chunk_sample(
            draw, p.run, self.lane, task.window, task.hotkey, chunks, p.scoring.check_chunks
        )
        digest_in, _, digest_out = commitments(upload.meta, task.window)
        tensors = reads.answer(
            self.rt,
            self.lane,
            task.window,
            task.hotkey,
            chunks,
            ids,
            digest_in == FRESH,
            self.read_seconds,
        )
        task.bytes = sum(t.numel() * t.element_size() for t in tensors.values())
        return chunks, ids, parse_answer(chunks, ids, tensors, digest_in, digest_out)

    def _compare(
        self,
        upload: Received,
        chunks: ChunkMap,
        ids: list[int],
        delta: dict[str, torch.Tensor],
        answer: Answer,
        tolerance: float,
    ) -> Outcome:
        """The comparison on the drawn chunks (``subnet.verify.check``) at ``tolerance``."""
        p = self.rt.cfg.protocol
        decoded = upload.decode()
        parts = chunks_for(
            chunks, ids, delta, answer.ef_in, answer.ef_out, decoded, p.compression.topk
        )
        rules = self.compressor.info.check  # what the codec declares a check of it verifies
        return check(parts, p.compression.ef_decay, tolerance, rules, levels(decoded))
