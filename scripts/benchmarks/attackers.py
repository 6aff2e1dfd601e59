"""Attacker miners for the adversarial benchmark and its test (never part of ``subnet/``).

Each attacker is the real ``Miner`` with one behaviour changed, written as an attacker who has
read the code would: it keeps a valid receipt of its own assignment, the right plan digest and
base version, writes on the plan's gradient lane and signs with its own hotkey, so only the defences under test can stop it.

    python scripts/benchmarks/attackers.py <miner flags> --attack KIND[:VICTIM,VICTIM...]

``KIND`` is one of ``ATTACKS``; ``VICTIM``s are ss58 hotkeys of the miners a copier copies
(default: any other miner). ``--attack ...`` is taken off the command line before the miner's
own flags are parsed.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import torch
from loguru import logger

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import poisons  # noqa: E402
from subnet.data import random_sample_ids, sample_receipt  # noqa: E402
from subnet.model import build_model  # noqa: E402
from subnet.neuron.audit import STATE_OUT, capture, state_digest  # noqa: E402
from subnet.neuron.miner import Miner, Upload  # noqa: E402
from subnet.neuron.rules import DATA_RULES, samples_per_window  # noqa: E402
from subnet.neuron.steps import Step  # noqa: E402
from subnet.node.entry import run_role  # noqa: E402
from subnet.scoring.assess import WindowProbe  # noqa: E402
from subnet.scoring.draws import REPORTED_HELDOUT  # noqa: E402
from subnet.storage.base import ObjectNotFound, StorageError  # noqa: E402
from subnet.storage.keys import ObjectKind, object_key  # noqa: E402
from subnet.wire import (  # noqa: E402
    Envelope,
    Expected,
    Rejected,
    encode_envelope,
    envelope_header,
    fetch_envelope,
)
from subnet.wire.commit import commit_digest  # noqa: E402


class Attacker(Miner):
    """Shared helpers: who the others are, a valid-looking metadata block, polling peers."""

    victims: tuple[str, ...] = ()
    lane: str | None = None  # the gradient lane the plan's ``train`` step writes

    def train(self, step: Step) -> Upload:
        """The ``train`` action, remembering the step's lane (the attacks read and write it)."""
        self.lane = step.lane
        return super().train(step)

    actions = {**Miner.actions, "train": train}

    def others(self) -> list[str]:
        """Miners to copy from: the named victims, or every other writer of the gradient lane."""
        if self.victims:
            return list(self.victims)
        return [hk for hk in self.rt.writers(self.lane) if hk != self.rt.hotkey]

    def key(self, window: int, hotkey: str) -> str:
        """The object key of ``hotkey``'s upload of ``window`` on the gradient lane."""
        return object_key(self.rt.cfg.protocol.run, ObjectKind.GRADIENT, window, hotkey,
                          lane=self.lane)  # fmt: skip

    def metadata(self, window: int, tokens: str = "0") -> dict[str, str]:
        """What an honest upload's metadata says, for this attacker's own assignment."""
        ids = DATA_RULES[self.rt.plan.data_rule](self.rt, self.data, window)(self.rt.hotkey)
        return {"receipt": sample_receipt(ids), "samples": str(len(ids)),
                "steps": str(self.rt.cfg.protocol.inner.steps), "tokens": tokens,
                "loss": "0.0"}  # fmt: skip

    def fetch(self, hotkey: str, window: int, base_version: int | None) -> Envelope | None:
        """``hotkey``'s verified upload of ``window``, or None if it is not (yet) readable."""
        reader = self.rt.readers.get(hotkey)
        if reader is None:
            return None
        expected = Expected(self.rt.cfg.protocol.run, window, ObjectKind.GRADIENT, hotkey,
                            base_version=base_version, lane=self.lane,
                            plan=self.rt.plan.digest)  # fmt: skip
        try:
            return fetch_envelope(reader, expected, None, max_bytes=self.rt.max_bytes)
        except (ObjectNotFound, StorageError, Rejected):
            return None

    def poll(self, window: int, last_offset: int) -> tuple[str, Envelope] | None:
        """The first victim upload of ``window`` to appear by ``last_offset``, polled often."""
        last_tick = self.rt.windows.start(window) + last_offset
        while self.rt.clock.now() <= last_tick and not self.stop_event.is_set():
            for hotkey in self.others():
                envelope = self.fetch(hotkey, window, self.replica.version)
                if envelope is not None:
                    return hotkey, envelope
            time.sleep(0.25)  # a quarter block at the benchmark's pace: the victim's block
        return None

    def decoded(self, envelope: Envelope) -> dict[str, torch.Tensor]:
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        return self.compressor.decode(envelope.tensors, shapes)

    def publish(self, window: int, result: Upload | None, lane: str | None = None) -> None:
        if result is None:
            logger.info("attacker: nothing to send in window {}", window)
            return
        super().publish(window, result, lane=lane)

    def envelope(self, window: int, upload: Upload) -> bytes:
        """``upload`` as this attacker's signed gradient envelope for ``window``."""
        return encode_envelope(signer=self.rt.signer, run=self.rt.cfg.protocol.run,
                               kind=ObjectKind.GRADIENT, window=window, tensors=upload.payload,
                               base_version=self.replica.version, metadata=upload.metadata,
                               lane=self.lane, plan=self.rt.plan.digest)  # fmt: skip

    def commit_over(self, window: int, payload_sha256: str) -> None:
        """Write a commit to ``payload_sha256`` now, over whatever commit is there (the bucket is
        the attacker's own: write-once is a promise it need not keep)."""
        run = self.rt.cfg.protocol.run
        digest = commit_digest(run, self.lane, window, self.rt.hotkey, payload_sha256)
        commit = encode_envelope(signer=self.rt.signer, run=run, kind=ObjectKind.GRADIENT_COMMIT,
                                 window=window, tensors={}, metadata={"commit": digest},
                                 lane=self.lane)  # fmt: skip
        key = object_key(run, ObjectKind.GRADIENT_COMMIT, window, self.rt.hotkey, lane=self.lane)
        self.rt.store.put(key, commit)


class Copier(Attacker):
    """Re-signs another miner's upload as soon as it appears (the same block, if it can).

    On a commit-reveal lane nothing is readable before the deadline, so it races instead: it
    commits to nothing early, polls the victims' reveals from the first tick they may appear,
    and on the first one writes a commit to its copy (over any commit of its own) and the copy
    at once, hoping a validator's snapshot of the commits closes late enough to take it.
    """

    noise = 0.0

    def step(self, window: int) -> Upload | None:
        if self.rt.lane(self.lane).commit_reveal:
            return None  # nothing to copy before the deadline: the race is in ``reveal``
        found = self.poll(window, self.rt.cfg.protocol.window.upload_deadline - 1)
        return None if found is None else self.copy(window, *found)

    def copy(self, window: int, hotkey: str, envelope: Envelope) -> Upload:
        logger.info("copier: copying {}", hotkey[:8])
        if self.noise <= 0:
            payload = dict(envelope.tensors)
        else:
            delta = self.decoded(envelope)
            noisy = {k: v + self.noise * v.abs() * torch.randn_like(v) for k, v in delta.items()}
            payload = self.compressor.encode(noisy)
        return Upload(payload, self.metadata(window, envelope.metadata.get("tokens", "0")))

    def reveal(self, step: Step) -> None:
        """The race: copy the first victim reveal, commit to the copy, reveal the copy."""
        found = self.poll(step.window, self.rt.cfg.protocol.window.reveal_by)
        if found is None:
            logger.info("copier: no reveal to copy in window {}", step.window)
            return
        blob = self.envelope(step.window, self.copy(step.window, *found))
        self.commit_over(step.window, envelope_header(blob).payload_sha256)
        self.rt.store.put(self.key(step.window, self.rt.hotkey), blob)
        logger.info("copier: committed to and revealed a copy in window {}", step.window)

    actions = {**Attacker.actions, "reveal": reveal}


class NoisyCopier(Copier):
    """A copier that adds 1 % noise to the values, to dodge an exact-match check."""

    noise = 0.01


class StaleReplayer(Attacker):
    """Re-signs another miner's upload of the previous window for the current one."""

    def step(self, window: int) -> Upload | None:
        for hotkey in self.others():
            envelope = self.fetch(hotkey, window - 1, None)
            if envelope is not None:
                logger.info("stale replayer: replaying {} of window {}", hotkey[:8], window - 1)
                delta = self.decoded(envelope)
                return Upload(self.compressor.encode(delta), self.metadata(window))
        return None


class _FirstBatches:
    """The dataset, except that ``batches`` yields only the first ``n`` micro-batches."""

    def __init__(self, data, n: int) -> None:
        self._data, self._n = data, n

    def batches(self, ids, micro_batch):
        return itertools.islice(self._data.batches(ids, micro_batch), self._n)

    def __getattr__(self, name: str):
        return getattr(self._data, name)


class LazyTrainer(Attacker):
    """Trains 1 of the H assigned steps but sends a receipt claiming all of them."""

    def step(self, window: int) -> Upload:
        data, self.data = (
            self.data,
            _FirstBatches(self.data, self.rt.cfg.protocol.inner.accumulation),
        )
        try:
            upload = super().step(window)
        finally:
            self.data = data
        # The honest miner would name the 1-step prefix it trained (and be paid 1/H); this one
        # claims the whole assignment.
        tokens = str(samples_per_window(self.rt) * self.rt.cfg.protocol.seq_len)
        upload.metadata.update(
            {k: v for k, v in self.metadata(window, tokens).items() if k != "loss"}
        )
        return upload


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
        probe = WindowProbe(self.replica.model, self.replica.state,
                            lambda xs: self.data.batches(xs, p.inner.micro_batch))  # fmt: skip
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
    about the state it leaves, and that window's audit replays the state and finds it out."""

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
        held.after = capture(line.optimizer if line.keep_optimizer else None, line.ef)
        upload.metadata[STATE_OUT] = state_digest(held.after)
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


class Switcher(_Transform):
    """Reveals its honest upload, lets the validators score it, then rewrites it in its own
    bucket with ``-5 x`` of it before the holder's merge: bait and switch.

    Validators score the honest work (they cannot tell; a miner's server may even serve each
    reader different bytes); the holder must not merge the switched bytes with the honest
    upload's score, and merges a score only into the payload it was given for. It signed two
    payloads for the window, so the holder's next version names it and the validators ban it.
    """

    pending: tuple[int, bytes] | None = None  # (window, the switched envelope)
    switched: Upload | None = None

    def step(self, window: int) -> Upload:
        honest = super().step(window)
        shapes = {k: tuple(v.shape) for k, v in self.replica.state.items()}
        poison = {k: -5.0 * v for k, v in self.compressor.decode(honest.payload, shapes).items()}
        self.switched = Upload(self.compressor.encode(poison), dict(honest.metadata))
        return honest

    def transform(self, delta, window):
        return delta

    def reveal(self, step: Step):
        sealed = super().reveal(step)
        if sealed is not None and self.switched is not None:
            self.pending = (step.window, self.envelope(step.window, self.switched))
        return sealed

    def observe(self, tick: int, window: int, offset: int) -> None:
        super().observe(tick, window, offset)
        w = self.rt.cfg.protocol.window
        if self.pending and self.pending[0] == window and offset >= w.report_deadline - 1:
            self.rt.store.put(self.key(window, self.rt.hotkey), self.pending[1])
            logger.info("switcher: replaced the scored upload of window {}", window)
            self.pending = None

    actions = {**_Transform.actions, "reveal": reveal}


class FreeRider(Attacker):
    """Trains nothing and sends an all-zero update with a receipt claiming the work."""

    def step(self, window: int) -> Upload:
        zeros = {k: torch.zeros_like(v) for k, v in self.replica.state.items()}
        return Upload(self.compressor.encode(zeros), self.metadata(window))


class LateUploader(Attacker):
    """Trains honestly but uploads only after the upload deadline has passed."""

    def publish(self, window: int, result: Upload | None, lane: str | None = None) -> None:
        w = self.rt.cfg.protocol.window
        after = self.rt.windows.start(window) + w.upload_deadline + 1
        give_up = time.monotonic() + 120
        while self.rt.clock.now() < after and time.monotonic() < give_up:
            time.sleep(0.25)
        super().publish(window, result, lane=lane)


class MalformedSender(Attacker):
    """Writes a different broken object under its upload key each window (after a valid commit
    to the honest envelope it spoils, so the broken object is what is read), and in one window
    of five a broken commit instead."""

    spoiled: tuple[int, bytes, bytes] = (-1, b"", b"")

    def step(self, window: int) -> bytes:
        blob = self.envelope(window, super().step(window))
        variants = [
            b"BEAM" + os.urandom(64),  # garbage after the magic
            blob[: len(blob) // 2],  # truncated
            blob[:-8] + bytes(8),  # payload no longer matches the signed digest
            blob[:9] + os.urandom(64) + blob[73:],  # header bytes scrambled
        ]
        self.spoiled = (window, blob, variants[window % len(variants)])
        return blob

    def publish(self, window: int, result, lane: str | None = None) -> None:
        run, hotkey = self.rt.cfg.protocol.run, self.rt.hotkey
        if not self.rt.lane(self.lane).commit_reveal:
            self.rt.store.put(self.key(window, hotkey), self.spoiled[2])
        elif window % 5 == 4:
            key = object_key(run, ObjectKind.GRADIENT_COMMIT, window, hotkey, lane=self.lane)
            self.rt.store.put(key, b"BEAM" + os.urandom(200))  # a broken commit
        else:
            self.commit_over(window, envelope_header(result).payload_sha256)

    def reveal(self, step: Step) -> None:
        window, _, broken = self.spoiled
        if window == step.window:
            self.rt.store.put(self.key(window, self.rt.hotkey), broken)

    actions = {**Attacker.actions, "reveal": reveal}


class EnvelopeReplayer(Attacker):
    """Puts another miner's signed envelope of the previous window, byte for byte, under its key
    (on a commit-reveal lane after committing to exactly those bytes under its own hotkey)."""

    replayed: tuple[int, bytes] | None = None

    def step(self, window: int) -> bytes | None:
        for hotkey in self.others():
            reader = self.rt.readers.get(hotkey)
            try:
                return reader.get(self.key(window - 1, hotkey), self.rt.max_bytes)
            except (ObjectNotFound, StorageError, AttributeError):
                continue
        return None

    def publish(self, window: int, result, lane: str | None = None) -> None:
        if result is None:
            return
        if not self.rt.lane(self.lane).commit_reveal:
            self.rt.store.put(self.key(window, self.rt.hotkey), result)
            return
        self.commit_over(window, envelope_header(result).payload_sha256)
        self.replayed = (window, result)

    def reveal(self, step: Step) -> None:
        if self.replayed is not None and self.replayed[0] == step.window:
            self.rt.store.put(self.key(step.window, self.rt.hotkey), self.replayed[1])

    actions = {**Attacker.actions, "reveal": reveal}


ATTACKS: dict[str, type[Attacker]] = {
    "copier": Copier,
    "noisy_copier": NoisyCopier,
    "stale_replayer": StaleReplayer,
    "lazy_trainer": LazyTrainer,
    "subtle_poisoner": SubtlePoisoner,
    "hugging_poisoner": HuggingPoisoner,
    "orthogonal_poisoner": OrthogonalPoisoner,
    "heldout_poisoner": HeldoutPoisoner,
    "sign_flipper": SignFlipper,
    "inflater": Inflater,
    "switcher": Switcher,
    "free_rider": FreeRider,
    "late_uploader": LateUploader,
    "malformed_sender": MalformedSender,
    "envelope_replayer": EnvelopeReplayer,
    "state_poisoner": StatePoisoner,
}


def _take_attack(argv: list[str]) -> tuple[str, tuple[str, ...]]:
    """Remove ``--attack KIND[:V1,V2]`` from ``argv``; return the kind and the victims."""
    i = argv.index("--attack")
    spec = argv[i + 1]
    del argv[i : i + 2]
    kind, _, victims = spec.partition(":")
    if kind not in ATTACKS:
        raise SystemExit(f"error: unknown attack {kind!r}; one of {', '.join(ATTACKS)}")
    return kind, tuple(v for v in victims.split(",") if v)


def main() -> int:
    kind, victims = _take_attack(sys.argv)
    role = type(ATTACKS[kind].__name__, (ATTACKS[kind],), {"victims": victims, "role": "miner"})
    return run_role(role, f"{kind} attacker (benchmarks and tests only)")


if __name__ == "__main__":
    sys.exit(main())
