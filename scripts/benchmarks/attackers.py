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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subnet.kernels import pin  # noqa: E402

# The kernels every neuron pins, before torch loads (run_role's own pin() comes too late here):
# an attacker who read the code trains on them too, so its honest part replays exactly.
pin()

import torch  # noqa: E402
from loguru import logger  # noqa: E402

from benchmarks.attack_base import Attacker  # noqa: E402
from benchmarks.dodgers import (  # noqa: E402
    ClassClaimer,
    ClassFlipper,
    NarrowLiar,
    Turncoat,
    late_answerers,
)
from benchmarks.poisoners import (  # noqa: E402
    BiasGroup,
    HeldoutPoisoner,
    HuggingPoisoner,
    Inflater,
    LateLiar,
    OrthogonalPoisoner,
    SignFlipper,
    StatePoisoner,
    SubtlePoisoner,
    _Transform,
)
from subnet.neuron.bindings import samples_per_window  # noqa: E402
from subnet.neuron.miner import Upload  # noqa: E402
from subnet.neuron.steps import Step  # noqa: E402
from subnet.node.entry import run_role  # noqa: E402
from subnet.storage.base import ObjectNotFound, StorageError  # noqa: E402
from subnet.storage.keys import ObjectKind, object_key  # noqa: E402
from subnet.wire import (  # noqa: E402
    Envelope,
    envelope_header,
)


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
        # The window's training reads the dataset it was built with (``WindowTraining``)
        data = self.training.data
        self.training.data = _FirstBatches(data, self.rt.cfg.protocol.inner.accumulation)
        try:
            upload = super().step(window)
        finally:
            self.training.data = data
        # The honest miner would name the 1-step prefix it trained (and be paid 1/H); this one
        # claims the whole assignment.
        tokens = str(samples_per_window(self.rt) * self.rt.cfg.protocol.seq_len)
        upload.metadata.update(
            {k: v for k, v in self.metadata(window, tokens).items() if k != "loss"}
        )
        return upload


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
    # three hotkeys of one group: the same shared bias (their shares are summed, ``GROUPS``)
    "bias_group_a": BiasGroup,
    "bias_group_b": BiasGroup,
    "bias_group_c": BiasGroup,
    "late_liar": LateLiar,
    # the checks' dodgers (``dodgers.py``): a lie kept to a few chunks, a miner that turns
    # once verified, late answerers that join in pairs and hold the newcomers' places
    "narrow_liar": NarrowLiar,
    "turncoat": Turncoat,
    # the subtle poisoner from its first upload, which bench.py adversarial --voucher's third
    # validator says passed its checks: paid by nobody honest all the same
    "vouched_liar": SubtlePoisoner,
    # replay classes (protocol v12): a liar claiming a class no validator covers, and one that
    # flips between its own class and that one every window
    "class_claimer": ClassClaimer,
    "class_flipper": ClassFlipper,
    **late_answerers(8),
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
