"""The model holder: merge each window's uploads weighted by the validators' median scores.

After the window's report deadline it reads the score reports of the validators it trusts
(those with a validator permit), weights each miner by the median of their scores (by samples
trained when nobody scored the window), fetches and verifies the uploads, aggregates them
robustly (norm clipping to the median norm, then the configured rule), takes the outer step
(plain SGD at lr 2 by default, as SparseLoCo prescribes; Nesterov for dense updates) and
publishes version v+1: a lossless patch against v, a full checkpoint every K versions, and a
signed manifest naming the version and its hash.
It also publishes the dataset to its bucket, so every peer trains and scores on the same shards.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import torch
from loguru import logger
from pydantic import Field, TypeAdapter

from ..compression import build_compressor
from ..config import ConfigError
from ..data import MANIFEST_KEY, TokenDataset
from ..model import build_model, evaluate_loss
from ..scoring import merge_weights
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind, dataset_prefix
from ..training import aggregate, build_outer_optimizer, load_parameters, snapshot
from ..versions import VersionPublisher
from ..wire import Expected, Rejected, fetch_envelope
from .base import BaseNeuron
from .miner import assignment, samples_per_window
from .replica import checkpoint_bytes
from .runtime import Runtime
from .state import prefixed, unprefixed
from .uploads import collect_uploads, log_uploads

_REPORT = TypeAdapter(dict[str, Annotated[float, Field(allow_inf_nan=False)]])


def parse_report(text: str) -> dict[str, float]:
    """A validator's scores (miner hotkey -> finite score); ValueError for anything else."""
    return _REPORT.validate_json(text)  # pydantic's ValidationError is a ValueError


def publish_dataset(rt: Runtime) -> None:
    """Copy the prepared dataset from ``--data.dir`` to this bucket unless it is there."""
    prefix = dataset_prefix(rt.cfg.protocol.dataset)
    try:
        rt.store.head(prefix + MANIFEST_KEY)
        return
    except ObjectNotFound:
        pass
    folder = Path(rt.cfg.node.data.dir).expanduser() / rt.cfg.protocol.dataset
    if not (folder / MANIFEST_KEY).exists():
        raise ConfigError(
            f"dataset {rt.cfg.protocol.dataset} not found in {folder}; build it with "
            f"`python scripts/prepare_data.py --out {folder}` or set --data.dir"
        )
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:  # shards first, manifest last: readers never see a partial dataset
        if path.name != MANIFEST_KEY:
            rt.store.put(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    rt.store.put(prefix + MANIFEST_KEY, (folder / MANIFEST_KEY).read_bytes())
    logger.info("published dataset {} ({} files) to {}", folder.name, len(files), rt.store.location)


class ModelHolder(BaseNeuron):
    """Merges, steps and publishes; the source of every model version."""

    role = "holder"

    def __init__(self, rt: Runtime) -> None:
        super().__init__(rt)
        p = rt.cfg.protocol
        if rt.hotkey != p.holder_hotkey:
            raise ConfigError(
                f"this wallet's hotkey {rt.hotkey} is not --protocol.holder_hotkey "
                f"{p.holder_hotkey}; peers would not follow its versions"
            )
        publish_dataset(rt)
        self.data: TokenDataset = rt.dataset()
        self.model = build_model(p.model, vocab_size=self.data.vocab_size, seed=p.seed)
        self.outer = build_outer_optimizer(p.outer)
        self.compressor = build_compressor(p.compression)
        self.publisher = VersionPublisher(rt.store, rt.wallet.hotkey, p.run,
                                          checkpoint_every=p.checkpoint_every,
                                          max_bytes=max(rt.max_bytes, checkpoint_bytes(self.model)))  # fmt: skip
        self.version: int | None = None  # the last version published
        self.unpublished: int | None = None  # a window merged into the model, not yet published

    def phase(self) -> tuple[int, int]:
        w = self.rt.cfg.protocol.window
        return w.report_deadline, w.blocks - 1

    def resume(self) -> None:
        """Continue from local state, or from what the bucket says was published last."""
        super().resume()
        published = self.publisher.resume()
        if published is None:  # a new run: the seeded initial model is version 0
            manifest = self.publisher.publish(snapshot(self.model), window=-1)
            self.version = manifest.version
            self._log_version(-1, manifest.version, contributors={})
            self.save()
        elif self.version is None or published.version > self.version:
            # Local state is missing or older than the bucket (a crash after publishing).
            load_parameters(self.model, self.publisher.latest_state)
            self.version, self.unpublished = published.version, None
            self.last_window = max(self.last_window, published.window)
            logger.info("continuing from published model version {}", published.version)

    def sync(self, window: int) -> None:
        self.graph = self.rt.refresh_readers()

    def step(self, window: int) -> dict[str, Any]:
        # A merge whose publication failed goes out first, byte for byte the same state, so the
        # version's write-once objects never conflict with a different merge.
        self._publish_pending({})
        started = time.perf_counter()
        p = self.rt.cfg.protocol
        trusted = {n.hotkey for n in self.graph.neurons if n.validator_permit}
        reports = self._reports(window, trusted)
        holder = self.rt.hotkey
        miners = [
            n.hotkey for n in self.graph.neurons if n.hotkey != holder and n.hotkey not in trusted
        ]
        params = snapshot(self.model)
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        got = collect_uploads(self.rt, window, miners, base_version=self.version,
                              compressor=self.compressor, shapes=shapes,
                              assigned=assignment(self.rt, self.data, window))  # fmt: skip
        # Units when nobody scored: the samples each receipt proves trained (the whole
        # assignment, or the prefix a partial upload names), never a number the miner claims.
        units = {hk: got.accepted[hk].samples or samples_per_window(self.rt) for hk in got.accepted}
        weights = merge_weights(reports, trusted, units)
        chosen = [hk for hk in sorted(got.accepted) if weights.get(hk, 0.0) > 0]
        log_uploads(self.rt.metrics, window, got, weights, len(reports))
        if not chosen:
            logger.info("window {}: nothing to merge ({} uploads)", window, len(got.accepted))
            return {"merged": False, "weights": weights}
        delta = aggregate([got.accepted[hk].delta for hk in chosen],
                          [weights[hk] for hk in chosen], p.aggregation)  # fmt: skip
        self.outer.step(params, delta)
        load_parameters(self.model, params)
        self.unpublished = window
        # Bytes and DDP bytes over the same uploads as the merge (the contributors): what DDP
        # would have sent for the same work is an fp32 gradient of the whole model per step
        # each contributor trained.
        sent = sum(got.accepted[hk].nbytes for hk in chosen)
        n_params = sum(t.numel() for t in params.values())
        ddp = sum(got.accepted[hk].steps or p.inner.steps for hk in chosen) * n_params * 4
        return {"merged": True, "weights": {hk: weights[hk] for hk in chosen}, "bytes": sent,
                "tokens": sum(got.accepted[hk].tokens for hk in chosen),
                "reports": len(reports), "ddp_bytes": ddp,
                "merge_seconds": round(time.perf_counter() - started, 3)}  # fmt: skip

    def _reports(self, window: int, trusted: set[str]) -> dict[str, dict[str, float]]:
        """Window scores from each trusted validator's signed report (bad ones are skipped)."""
        out: dict[str, dict[str, float]] = {}
        for hotkey in sorted(trusted):
            reader = self.rt.readers.get(hotkey)
            if reader is None:
                continue
            expected = Expected(self.rt.cfg.protocol.run, window, ObjectKind.SCORES, hotkey)
            try:
                envelope = fetch_envelope(reader, expected, None, max_bytes=self.rt.max_bytes)
                if envelope.metadata.get("config_hash") != self.rt.cfg.protocol.config_hash():
                    raise ValueError("report made under other protocol settings")
                out[hotkey] = parse_report(envelope.metadata.get("scores", ""))
            except (StorageError, Rejected, ValueError) as error:
                logger.info("no usable report from {} for window {}: {}", hotkey[:8], window, error)
        return out

    def publish(self, window: int, result: dict[str, Any]) -> None:
        if result["merged"]:
            keys = ("weights", "bytes", "tokens", "reports", "ddp_bytes", "merge_seconds")
            self._publish_pending({k: result[k] for k in keys})

    def _publish_pending(self, fields: dict[str, Any]) -> None:
        """Publish the merged model as the next version (nothing to do if it is out already)."""
        if self.unpublished is None:
            return
        manifest = self.publisher.publish(snapshot(self.model), self.unpublished)
        self.version, window, self.unpublished = manifest.version, self.unpublished, None
        contributors = fields.pop("weights", {})
        self._log_version(window, manifest.version, contributors=contributors, **fields)

    def _log_version(self, window: int, version: int, **fields: Any) -> None:
        loss = evaluate_loss(self.model, self.data.heldout_batches(8, max_batches=4))
        logger.info("model version {} (window {}): held-out loss {:.4f}", version, window, loss)
        self.rt.metrics.log("version", window=window, version=version, heldout_loss=loss, **fields)

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        tensors = {
            **prefixed(snapshot(self.model), "model"),
            **prefixed(self.outer.state_dict(), "outer"),
        }
        return {"version": self.version, "unpublished": self.unpublished}, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        self.version = meta.get("version")
        self.unpublished = meta.get("unpublished")
        model = unprefixed(tensors, "model")
        if model:
            load_parameters(self.model, model)
        self.outer.load_state_dict(unprefixed(tensors, "outer"))
