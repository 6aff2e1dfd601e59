"""A miner's uploads going out: written once, or committed to before the deadline and revealed
after it.

On a commit-reveal lane ``train`` seals the signed upload (``commits.py``), keeps it here and
in the state file before any commit to it goes out (a restart reveals these very bytes), and
writes the commit; the ``reveal`` step writes the envelope after the deadline. A reveal whose
write fails stays pending and is tried again next tick; the window's ``train`` record is logged
once it is out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from loguru import logger

from ..storage.base import StorageError
from ..storage.keys import ObjectKind
from .commits import Sealed, seal, write_commit, write_reveal
from .runtime import Runtime
from .upload import Upload


class Reveals:
    """The uploads committed to and not yet revealed, by lane; ``save`` persists the role."""

    def __init__(self, rt: Runtime, save: Callable[[], None]) -> None:
        self.rt = rt
        self.save = save
        self.sealed: dict[str, Sealed] = {}  # lane -> the upload committed to, not yet revealed

    def of(self, lane: str | None, window: int) -> Sealed | None:
        """The upload committed to on ``lane`` for ``window``, if not yet revealed."""
        sealed = self.sealed.get(lane or "")
        return sealed if sealed is not None and sealed.window == window else None

    def unrevealed(self, lane: str, window: int) -> bool:
        """Whether the upload of ``window`` on ``lane`` is committed to and not yet revealed."""
        return lane in self.sealed and self.sealed[lane].window == window

    def due(self, window: int) -> list[Sealed]:
        """Reveals owed: a failed one, or one a stall or restart let pass ``window``."""
        return [s for s in self.sealed.values() if s.pending or s.window < window]

    def commit(
        self, window: int, lane: str, upload: Upload, version: int | None, record: dict[str, Any]
    ) -> Sealed:
        """Seal ``upload``, keep it (saved before the commit goes out), write the commit."""
        sealed = seal(self.rt, window, lane, upload.payload, version, upload.metadata)
        sealed.record = record
        self.sealed[lane] = sealed
        self.save()  # on disk before any commit to it: a restart reveals these very bytes
        write_commit(self.rt, sealed)
        return sealed

    def send(self, sealed: Sealed) -> bool:
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

    def state_dict(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """``sealed`` (each upload's record) and its bytes as ``sealed:<lane>`` tensors."""
        meta = {"sealed": {lane: s.meta() for lane, s in self.sealed.items()}}
        tensors = {
            f"sealed:{lane}": torch.frombuffer(bytearray(s.blob), dtype=torch.uint8)
            for lane, s in self.sealed.items()
        }
        return meta, tensors

    def load_state_dict(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state_dict` saved (a record without its bytes is dropped)."""
        self.sealed = {
            lane: Sealed.load(m, tensors[f"sealed:{lane}"])
            for lane, m in meta.get("sealed", {}).items()
            if f"sealed:{lane}" in tensors
        }


def write_update(
    rt: Runtime, window: int, upload: Upload, version: int | None, lane: str | None
) -> str:
    """Sign and write ``upload`` once to this node's bucket on ``lane`` (no commit before it);
    its key."""
    key, written = rt.outbox(lane).publish(
        ObjectKind.GRADIENT,
        window,
        upload.payload,
        metadata=upload.metadata,
        base_version=version,
    )
    logger.info("uploaded {} ({})", key, "new" if written else "already there")
    return key
