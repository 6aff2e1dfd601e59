"""Fetching a window's uploads: every verified gradient, and why each other one is missing.

Shared by the validator (which scores them) and the model holder (which merges them). Each
upload is fetched from its sender's own bucket, verified as a signed envelope (size, signature,
run, window, sender, base version), checked as a payload of the configured compressor against
the model's shapes, and decoded. Nothing unverified reaches a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from loguru import logger

from ..compression import Compressor
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..wire import Expected, Reason, Rejected, fetch_envelope
from .runtime import Runtime


@dataclass
class Received:
    """A verified, decoded upload."""

    hotkey: str
    delta: dict[str, torch.Tensor]
    metadata: dict[str, str]
    nbytes: int


@dataclass
class WindowUploads:
    """What a window's senders delivered: decoded uploads, and the reason for everyone else."""

    accepted: dict[str, Received] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    stale: set[str] = field(default_factory=set)
    rejected: dict[str, str] = field(default_factory=dict)  # hotkey -> reason code


def collect_uploads(
    rt: Runtime,
    window: int,
    senders: Iterable[str],
    *,
    base_version: int | None,
    compressor: Compressor,
    shapes: Mapping[str, tuple[int, ...]],
) -> WindowUploads:
    """Fetch, verify and decode each sender's gradient for ``window``."""
    out = WindowUploads()
    run = rt.cfg.protocol.run
    for hotkey in senders:
        reader = rt.readers.get(hotkey)
        if reader is None:
            out.rejected[hotkey] = "no_bucket"
            continue
        expected = Expected(run, window, ObjectKind.GRADIENT, hotkey, base_version=base_version)
        try:
            envelope = fetch_envelope(reader, expected, None, max_bytes=rt.max_bytes)
        except ObjectNotFound:
            out.missing.add(hotkey)
            continue
        except StorageError as error:
            out.missing.add(hotkey)
            logger.warning("upload of {} unreadable ({}): {}", hotkey[:8], error.reason, error)
            continue
        except Rejected as error:
            if error.reason == Reason.WRONG_BASE_VERSION:
                out.stale.add(hotkey)
            else:
                out.rejected[hotkey] = str(error.reason.value)
            logger.info("upload of {} rejected: {}", hotkey[:8], error)
            continue
        if envelope.metadata.get("config_hash") != rt.cfg.protocol.config_hash():
            out.rejected[hotkey] = "wrong_config"  # trained under other protocol settings
            logger.info("upload of {} rejected: protocol config hash differs", hotkey[:8])
            continue
        reason = compressor.validate(envelope.tensors, shapes)
        if reason is not None:
            out.rejected[hotkey] = reason
            logger.info("upload of {} rejected: {}", hotkey[:8], reason)
            continue
        delta = compressor.decode(envelope.tensors, shapes)
        nbytes = int(envelope.header.payload_bytes)
        out.accepted[hotkey] = Received(hotkey, delta, dict(envelope.metadata), nbytes)
    return out


def support(delta: Mapping[str, torch.Tensor]) -> frozenset[int]:
    """Global flat indices of the non-zero coordinates of a sparse update (for copy checks)."""
    indices: list[int] = []
    offset = 0
    for name in sorted(delta):
        flat = delta[name].reshape(-1)
        indices.extend((torch.nonzero(flat).reshape(-1) + offset).tolist())
        offset += flat.numel()
    return frozenset(indices)
