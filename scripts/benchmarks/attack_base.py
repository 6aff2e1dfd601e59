"""The base of every attacker miner of the adversarial benchmark (never part of ``subnet/``):
the real ``Miner`` with helpers an attacker who has read the code would write."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from loguru import logger

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subnet.data import sample_receipt  # noqa: E402
from subnet.neuron.miner import Miner, Upload  # noqa: E402
from subnet.neuron.rules import DATA_RULES  # noqa: E402
from subnet.neuron.steps import Step  # noqa: E402
from subnet.storage.base import ObjectNotFound, StorageError  # noqa: E402
from subnet.storage.keys import ObjectKind, object_key  # noqa: E402
from subnet.wire import (  # noqa: E402
    Envelope,
    Expected,
    Rejected,
    encode_envelope,
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
        return object_key(
            self.rt.cfg.protocol.run, ObjectKind.GRADIENT, window, hotkey, lane=self.lane
        )

    def metadata(self, window: int, tokens: str = "0") -> dict[str, str]:
        """What an honest upload's metadata says, for this attacker's own assignment."""
        ids = DATA_RULES[self.rt.plan.data_rule](self.rt, self.data, window)(self.rt.hotkey)
        return {
            "receipt": sample_receipt(ids),
            "samples": str(len(ids)),
            "steps": str(self.rt.cfg.protocol.inner.steps),
            "tokens": tokens,
            "loss": "0.0",
        }

    def fetch(self, hotkey: str, window: int, base_version: int | None) -> Envelope | None:
        """``hotkey``'s verified upload of ``window``, or None if it is not (yet) readable."""
        reader = self.rt.readers.get(hotkey)
        if reader is None:
            return None
        expected = Expected(
            self.rt.cfg.protocol.run,
            window,
            ObjectKind.GRADIENT,
            hotkey,
            base_version=base_version,
            lane=self.lane,
            plan=self.rt.plan.digest,
        )
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
        return encode_envelope(
            signer=self.rt.signer,
            run=self.rt.cfg.protocol.run,
            kind=ObjectKind.GRADIENT,
            window=window,
            tensors=upload.payload,
            base_version=self.replica.version,
            metadata=upload.metadata,
            lane=self.lane,
            plan=self.rt.plan.digest,
        )

    def commit_over(self, window: int, payload_sha256: str) -> None:
        """Write a commit to ``payload_sha256`` now, over whatever commit is there (the bucket is
        the attacker's own: write-once is a promise it need not keep)."""
        run = self.rt.cfg.protocol.run
        digest = commit_digest(run, self.lane, window, self.rt.hotkey, payload_sha256)
        commit = encode_envelope(
            signer=self.rt.signer,
            run=run,
            kind=ObjectKind.GRADIENT_COMMIT,
            window=window,
            tensors={},
            metadata={"commit": digest},
            lane=self.lane,
        )
        key = object_key(run, ObjectKind.GRADIENT_COMMIT, window, self.rt.hotkey, lane=self.lane)
        self.rt.store.put(key, commit)
