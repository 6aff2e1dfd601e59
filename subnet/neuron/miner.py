"""The miner: train H inner steps on the assigned samples, upload the compressed pseudo-gradient.

Each window it syncs to the model version the holder published for it, trains on the samples
``assign_samples(seed, window, hotkey)`` names, computes ``start - end``, adds its error
feedback, compresses (SparseLoCo by default) and writes one signed envelope, write-once, to its
own bucket. The envelope carries the base model version and a receipt of the sample ids, so
validators can check both. It paces itself against the upload deadline (``pacing.py``): all
steps, a credited prefix of at least ``inner.min_steps``, or an early skip, never a silent late
upload.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from loguru import logger

from ..compression import ErrorFeedback, Payload, build_compressor, payload_nbytes
from ..data import TokenDataset, assign_samples, sample_receipt
from ..monitor.progress import progress
from ..storage.keys import ObjectKind
from ..training import build_inner_optimizer, pseudo_gradient
from ..wire import publish_envelope
from .base import BaseNeuron
from .pacer import Pacer, WindowSkipped  # noqa: F401 (WindowSkipped: re-exported)
from .replica import Replica
from .runtime import Runtime
from .state import load_optimizer_state, optimizer_state, prefixed, unprefixed


class NonFinite(ArithmeticError):
    """Local training diverged (a NaN or infinite loss or update)."""

    reason = "non_finite"


@dataclass
class Upload:
    """One window's contribution, ready to sign."""

    payload: Payload
    metadata: dict[str, str]


def samples_per_window(rt: Runtime) -> int:
    """How many samples a miner trains on per window (H steps x micro-batch x accumulation)."""
    inner = rt.cfg.protocol.inner
    return inner.steps * inner.micro_batch * inner.accumulation


def assignment(rt: Runtime, data: TokenDataset, window: int) -> Callable[[str], list[int]]:
    """``hotkey -> sample ids`` it must train on in ``window`` (what receipts are checked against)."""
    seed, n, total = rt.cfg.protocol.seed, samples_per_window(rt), data.split_samples("train")
    return lambda hotkey: assign_samples(seed, window, hotkey, n, total)


class Miner(BaseNeuron):
    """Trains and uploads; keeps its AdamW state and error feedback across windows."""

    role = "miner"

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        p = rt.cfg.protocol
        self.data = rt.dataset()
        self.replica = Replica(rt, self.data.vocab_size)
        self.optimizer = build_inner_optimizer(self.replica.model, p.inner)
        self.compressor = build_compressor(p.compression)
        self.ef = ErrorFeedback(p.compression.ef_decay)
        self.sync_seconds = 0.0
        self.pacer = Pacer(rt)  # the upload deadline in seconds, and how much work fits

    def on_block(self, block: int, window: int, offset: int) -> None:
        self.pacer.observe(block)  # measures the block time

    def phase(self) -> tuple[int, int]:
        return 0, self.rt.cfg.protocol.window.upload_deadline - 1

    def sync(self, window: int) -> None:
        started = time.perf_counter()
        self._sync(window)
        self.sync_seconds = time.perf_counter() - started

    def _sync(self, window: int) -> None:
        w = self.rt.cfg.protocol.window
        # Normally the merge of the previous window is out already; give a slow holder a moment.
        deadline = self.rt.clock.start(window) + max(1, w.upload_deadline // 4)
        self.replica.sync(until_window=window - 1, deadline_block=deadline)

    def step(self, window: int) -> Upload:
        p = self.rt.cfg.protocol
        ids = assignment(self.rt, self.data, window)(self.rt.hotkey)
        start = self.replica.snapshot()
        batches = progress(self.data.batches(ids, p.inner.micro_batch), desc=f"window {window}",
                           total=p.inner.steps * p.inner.accumulation, unit="batch")  # fmt: skip
        paced = self.pacer.train(window, self.replica, batches, self.optimizer)
        result = paced.result
        ids = ids[: result.steps * p.inner.micro_batch * p.inner.accumulation]  # trained prefix
        delta = pseudo_gradient(start, self.replica.model)
        if not math.isfinite(result.mean_loss) or not all(
            bool(d.isfinite().all()) for d in delta.values()
        ):
            # Diverged: uploading would only be rejected, and NaN moments would poison every
            # later window. Start the local optimizer and error feedback afresh instead.
            self.replica.reset()
            self.optimizer = build_inner_optimizer(self.replica.model, p.inner)
            self.ef = ErrorFeedback(p.compression.ef_decay)
            raise NonFinite(f"window {window}: loss {result.mean_loss}; optimizer state reset")
        payload, _ = self.ef.compress(self.compressor, delta)
        self.replica.reset()  # the next window starts from the global model, not ours
        logger.info(
            "window {}: {} steps, loss {:.4f}, {} bytes", window, result.steps, result.mean_loss,
            payload_nbytes(payload),
        )  # fmt: skip
        self.rt.metrics.log(
            "train", window=window, steps=result.steps, tokens=result.tokens,
            loss=result.mean_loss, seconds=result.seconds, bytes=payload_nbytes(payload),
            version=self.replica.version, sync_seconds=round(self.sync_seconds, 3),
            steps_assigned=p.inner.steps, stopped=paced.stopped,
        )  # fmt: skip
        return Upload(payload, {"receipt": sample_receipt(ids), "samples": str(len(ids)),
                                "steps": str(result.steps),
                                "tokens": str(result.tokens), "loss": f"{result.mean_loss:.6f}",
                                "config_hash": p.config_hash()})  # fmt: skip

    def publish(self, window: int, result: Upload) -> None:
        key, written = publish_envelope(
            self.rt.store, signer=self.rt.wallet.hotkey, run=self.rt.cfg.protocol.run,
            kind=ObjectKind.GRADIENT, window=window, tensors=result.payload,
            base_version=self.replica.version, metadata=result.metadata,
        )  # fmt: skip
        logger.info("uploaded {} ({})", key, "new" if written else "already there")
        self.pacer.uploaded(window)  # warns and records when it landed late

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        groups, moments = optimizer_state(self.optimizer)
        tensors = {
            **prefixed(self.replica.state or {}, "model"),
            **prefixed(self.ef.state_dict(), "ef"),
            **prefixed(moments, "adamw"),
        }
        return {"version": self.replica.version, "adamw_groups": groups}, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        self.replica.restore(meta.get("version"), unprefixed(tensors, "model"))
        self.ef.load_state_dict(unprefixed(tensors, "ef"))
        load_optimizer_state(
            self.optimizer, meta.get("adamw_groups", []), unprefixed(tensors, "adamw")
        )
