"""A local copy of the global model that follows the model holder's published versions.

It never waits: whether the version a window needs is out is the ``version_out`` gate's
question (``latest_window``), asked by the loop at each tick.
"""

from __future__ import annotations

import torch
from loguru import logger

from ..model import build_model
from ..storage.base import StorageError
from ..training import load_parameters, snapshot
from ..versions import ModelManifest, ModelSync, SyncError
from .runtime import Runtime


def checkpoint_bytes(model: torch.nn.Module) -> int:
    """A bound on one full checkpoint's object: fp32 parameters twice over, plus the envelope.

    Version objects are read with this bound even when it exceeds the largest upload a peer
    accepts (``--protocol.max_upload_mb``), or a large model could never sync.
    """
    return 2 * 4 * sum(t.numel() for t in model.parameters()) + (1 << 20)


class MemberStore:
    """A member's bucket, looked up at each call (a changed commitment is picked up)."""

    def __init__(self, rt: Runtime, hotkey: str) -> None:
        self.rt, self.hotkey = rt, hotkey

    def __getattr__(self, name: str):
        store = self.rt.reader(self.hotkey)
        if store is None:
            raise SyncError("no_reader", f"no readable bucket for {self.hotkey}")
        return getattr(store, name)


class Replica:
    """The global model at a known version, as miners and validators hold it."""

    def __init__(
        self, rt: Runtime, vocab_size: int, lane: str = "model", stream: str | None = None
    ) -> None:
        """Follow the member writing ``lane`` (the plan's model lane), its versions on
        ``stream`` (a sweep point's ``lane.pI``; default: the lane itself)."""
        p = rt.cfg.protocol
        self.rt, self.lane, self.stream = rt, lane, stream or lane
        self.holder = rt.source_of(lane)
        self.model = build_model(p.model, vocab_size=vocab_size, seed=p.seed)
        self.model.to(rt.cfg.node.neuron.device)
        self.max_bytes = max(rt.max_bytes, checkpoint_bytes(self.model))
        self.state: dict[str, torch.Tensor] | None = None  # parameters at `version`
        self.version: int | None = None
        self.manifest: ModelManifest | None = None
        # One syncer for the neuron's life: it remembers the newest manifest it verified, so a
        # replayed older (validly signed) pointer is refused as a rollback.
        self.syncer = self._new_syncer()

    def latest_window(self) -> int:
        """The window whose merge the holder's newest version holds (-1: the initial model)."""
        return self._latest().window

    def sync(self) -> None:
        """Move to the holder's latest version (patches, or a checkpoint), hash-checked."""
        latest = self._latest()
        if self.version is not None and latest.version < self.version:
            logger.warning(
                "model holder is at version {}, behind our {}: it started over; following it",
                latest.version,
                self.version,
            )
            self.state, self.version = None, None
        if latest.version != self.version or self.state is None:
            self.state, self.manifest = self.syncer.sync(self.state, self.version)
            self.version = self.manifest.version
            logger.info("synced to model version {} ({})", self.version, self.manifest.digest[:12])
            fallback = self.syncer.last_fallback  # a delta or patch that did not do: why
            if fallback is not None:
                self.rt.metrics.log(
                    "sync_fallback",
                    version=self.version,
                    reason=fallback.reason,
                    path=self.syncer.last_path,
                )
        self.reset()

    def manifests_since(self, version: int | None, most: int) -> list[ModelManifest]:
        """The verified manifests of the versions after ``version`` up to the one held, at most
        the last ``most`` (what a follower passed over in one sync; the held one alone after a
        first sync; none when it did not move); unreadable ones left out."""
        if self.manifest is None or version == self.manifest.version:
            return []
        first = self.manifest.version if version is None else version + 1
        out = []
        for v in range(max(first, self.manifest.version - most + 1), self.manifest.version):
            try:
                out.append(self.syncer.manifest(v))
            except (SyncError, StorageError) as error:
                logger.info("manifest of version {} unread: {}", v, error)
        return [*out, self.manifest]

    def _latest(self) -> ModelManifest:
        """The holder's newest manifest, following it when it went back (it started over)."""
        try:
            return self.syncer.latest()
        except SyncError as error:
            if error.reason != "rollback":
                raise
            # Behind what we saw before: the holder started over (a new run on an empty bucket).
            # Its versions are still signed and hash-checked, so follow them from its checkpoint.
            logger.warning("model holder went back ({}); following it", error.detail)
            self.syncer = self._new_syncer()
            return self.syncer.latest()

    def _new_syncer(self) -> ModelSync:
        return ModelSync(
            MemberStore(self.rt, self.holder),
            self.holder,
            self.rt.cfg.protocol.run,
            max_bytes=self.max_bytes,
            lane=self.stream,
        )

    def reset(self) -> None:
        """Put the synced global parameters back into the model (after local training)."""
        assert self.state is not None, "sync first"
        load_parameters(self.model, self.state)

    def restore(self, version: int | None, state: dict[str, torch.Tensor]) -> None:
        """Adopt a saved version and its parameters."""
        if version is not None and state:
            self.version, self.state = version, state
            self.reset()

    def state_dict(self) -> dict[str, object]:
        """What a restart needs: the version followed and its parameters."""
        return {"version": self.version, "state": self.state}

    def snapshot(self) -> dict[str, torch.Tensor]:
        """The model's current parameters."""
        return snapshot(self.model)
