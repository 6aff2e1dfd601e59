"""Attackers that train honestly and then lie about what they send or keep: the poisoners, the
inflater, the sign flipper, the state poisoner, a group sharing a small bias and a miner that
is honest for its first uploads (the adversarial benchmark's; never part of ``subnet/``)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import poisons  # noqa: E402
from benchmarks.attack_base import Attacker  # noqa: E402
from subnet.data import random_sample_ids  # noqa: E402
from subnet.model import build_model  # noqa: E402
from subnet.neuron.answers import Held, chunk_map  # noqa: E402
from subnet.neuron.bindings import samples_per_window  # noqa: E402
from subnet.neuron.miner import Miner, Upload  # noqa: E402
from subnet.scoring.assess import WindowProbe  # noqa: E402
from subnet.scoring.draws import REPORTED_HELDOUT  # noqa: E402


class _Transform(Attacker):
    """Trains honestly, then sends ``transform(honest delta)`` instead."""

    def transform(self, delta: dict[str, torch.Tensor], window: int) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def step(self, window: int) -> Upload:
        honest = super().step(window)
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        delta = self.compressor.decode(honest.payload, shapes)
        return Upload(self.compressor.encode(self.transform(delta, window)), honest.metadata)


class _Poisoner(_Transform):
    """A trainer that also trains throw-away descent directions to bias its update with."""

    def direction(self, batches) -> dict[str, torch.Tensor]:
        """The pseudo-gradient of ``H`` inner steps from the current model on ``batches``."""
        p = self.rt.cfg.protocol
        worker = build_model(p.model, vocab_size=self.data.vocab_size, seed=p.seed)
        return poisons.descent(worker, self.replica.snapshot(), batches, p.inner)

    def generic(self) -> dict[str, torch.Tensor]:
        """A descent direction trained on random train samples (what every honest update has)."""
        p = self.rt.cfg.protocol
        ids = random_sample_ids(samples_per_window(self.rt), self.data.split_samples("train"))
        return self.direction(self.data.batches(ids, p.inner.micro_batch))


class SubtlePoisoner(_Poisoner):
    """An honest update minus a generic descent direction: a bias inside the honest spread.

    It also trains a throw-away copy on random samples and subtracts that update (scaled to
    half its own norm, on its own support), so it keeps the honest own-data signal and a norm
    within the honest spread while cancelling part of the improvement on data in general.
    """

    def transform(self, delta, window):
        return poisons.anti_generic(delta, self.generic(), 0.5)


class HuggingPoisoner(_Poisoner):
    """Cancels a quarter of its own measured gain on random data, and no more.

    It measures what it will send on random samples of its own (the validators' draw is
    unpredictable, so this is its best estimate) and scales the anti-generic bias by bisection
    to hug a tolerance it believes the validators allow.
    """

    fraction = 0.25

    def transform(self, delta, window):
        p = self.rt.cfg.protocol
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        ids = random_sample_ids(64, self.data.split_samples("train"))
        probe = WindowProbe(
            self.replica.model,
            self.replica.state,
            lambda xs: self.data.batches(xs, p.inner.micro_batch),
        )
        base = sum(probe.losses(None, ids))

        def gain(update):
            sent = self.compressor.decode(self.compressor.encode(update), shapes)
            return 1.0 - sum(probe.losses(sent, ids)) / base

        return poisons.hug(delta, self.generic(), gain, self.fraction)


class OrthogonalPoisoner(_Poisoner):
    """Adds the ascent direction with its part along its own honest update removed (half norm)."""

    def transform(self, delta, window):
        return poisons.orthogonal(delta, self.generic(), 0.5)


class HeldoutPoisoner(_Poisoner):
    """Adds ascent on the held-out samples the holder reports progress on (half its norm).

    Those samples are public and fixed, and never among the validators' random train samples.
    """

    def transform(self, delta, window):
        p = self.rt.cfg.protocol
        reported = list(self.data.batches(range(REPORTED_HELDOUT), p.inner.micro_batch, "heldout"))
        steps = p.inner.steps * p.inner.accumulation
        target = self.direction(itertools.islice(itertools.cycle(reported), steps))
        return poisons.on_support(delta, target, 0.5)


class StatePoisoner(_Poisoner):
    """Sends its honest update, but commits to an error feedback with a bias in it (a generic
    descent direction subtracted, at half its update's norm): the bias reaches the model
    through its *next* upload, which the committed state then explains. Every window it lies
    about the state it leaves, and a check of that window finds it out (the error feedback it
    proves is not its input minus what it sent)."""

    def step(self, window: int) -> Upload:
        upload = Miner.step(self, window)
        line, held = self.line, self.held_now
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        sent = self.compressor.decode(upload.payload, shapes)
        generic = self.generic()
        norm = sum(float(v.pow(2).sum()) for v in sent.values()) ** 0.5
        gnorm = sum(float(v.pow(2).sum()) for v in generic.values()) ** 0.5 or 1.0
        for name, buffer in line.ef.buffers.items():
            line.ef.buffers[name] = buffer - (0.5 * norm / gnorm) * generic[name]
        self.held_now = Held.of(
            chunk_map(self.rt, shapes),
            held.window,
            held.state_from,
            held.before,
            line.ef.state_dict(),
        )
        upload.metadata.update(self.held_now.wire())
        return upload


class SignFlipper(_Transform):
    """Sends ``-5 x`` its honest update."""

    def transform(self, delta, window):
        return {k: -5.0 * v for k, v in delta.items()}


class Inflater(_Transform):
    """Sends ``3 x`` its honest update: a bigger step lowers the validators' losses more.

    Measured unclipped, it was paid for its size; validators now measure every upload clipped
    to the window's median norm, as the holder merges it (``subnet.scoring.assess.AsMerged``).
    """

    def transform(self, delta, window):
        return {k: 3.0 * v for k, v in delta.items()}


class BiasGroup(Attacker):
    """One of three hotkeys that do the honest work and add one shared direction, 1 % of their
    update's norm, to the input of their codec: a bias small against the v5 audits' 5 %
    tolerance, spent together. Its error feedback carries the bias honestly (what it proves is
    its biased input minus what it sent), so only a check comparing that input with a replay
    sees it."""

    size = 0.01
    seed = 20_261_203  # the group's shared secret

    def step(self, window: int) -> Upload:
        ef = self.line.ef
        honest = ef.compress

        def biased(compressor, update):
            gen = torch.Generator().manual_seed(self.seed)
            direction = {k: torch.randn(v.shape, generator=gen) for k, v in sorted(update.items())}
            norm = sum(float(v.float().pow(2).sum()) for v in update.values()) ** 0.5
            dnorm = sum(float(v.pow(2).sum()) for v in direction.values()) ** 0.5 or 1.0
            scale = self.size * norm / dnorm
            return honest(compressor, {k: v + scale * direction[k] for k, v in update.items()})

        ef.compress = biased
        try:
            return super().step(window)
        finally:
            del ef.compress  # the instance attribute: the class's method again


class LateLiar(SubtlePoisoner):
    """Honest for its first ``honest_uploads`` uploads (it passes the checks a newcomer gets
    first), the subtle poisoner after them."""

    honest_uploads = 2
    done = 0

    def transform(self, delta, window):
        self.done += 1
        if self.done <= self.honest_uploads:
            return delta
        return super().transform(delta, window)
