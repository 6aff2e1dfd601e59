"""The model holder: merge each window's uploads weighted by the validators' median scores.

Its one action, ``merge`` (phase ``merge``: from the report deadline on), reads the score
reports on the plan's score lane from the members it trusts (writers of that lane holding
``runs.score``: on a chain, the validator permits), weights each sender by the plan's
merge-weights rule (``median_score``: the median of their scores, samples trained when nobody
scored the window), fetches and verifies the uploads, aggregates them
robustly (norm clipping to the median norm, then the configured rule), takes the outer step
(plain SGD at lr 2 by default, as SparseLoCo prescribes; Nesterov for dense updates) and
publishes version v+1: with a sparse codec, the merged step re-sparsified to one upload's budget
(``subnet.versions.delta``: peers apply it themselves, bit for bit), else a lossless patch against
v; a full checkpoint every K versions, and a signed manifest naming the version and its hash.
It also publishes the dataset to its bucket, so every peer trains and scores on the same shards.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import torch
from loguru import logger

from ..compression import build_compressor
from ..config import ConfigError
from ..data import MANIFEST_KEY, TokenDataset
from ..model import build_model, evaluate_loss
from ..scoring.report import bind_scores, contradicted, nobody_scored
from ..storage.base import ObjectNotFound, StorageError
from ..storage.keys import ObjectKind
from ..training import build_outer_optimizer, load_parameters, snapshot
from ..training.guard import PersistenceGuard
from ..training.streaming import merge_payloads
from ..versions import VersionPublisher
from ..versions.delta import Resparsifier, SparseDelta, uses_sparse_broadcast
from ..wire import Rejected, ScoreReportMeta, WeightsMeta
from .actions.consensus import consensus
from .actions.grants import admit, grant_data
from .actions.ring import final_merge
from .actions.sweep import fan_out
from .actions.tree import tree_senders
from .base import BaseNeuron
from .bindings import lane_data_rule, samples_per_window
from .equivocation import Caught
from .gates import GATES
from .merge_result import MergeResult
from .model_line import ModelLine, OnLine
from .points import Points
from .replica import checkpoint_bytes
from .rules import AGGREGATION_RULES, DATA_RULES, MERGE_WEIGHTS, OUTER_RULES, STOP_RULES
from .runtime import Runtime
from .state import prefixed, unprefixed
from .steps import Action, FanOutParams, GrantParams, MergeParams, Step, StepParams
from .uploads import WindowUploads, collect_uploads, log_uploads


def publish_dataset(rt: Runtime) -> None:
    """Copy the prepared dataset from ``--data.dir`` to this bucket (at the plan's data
    prefix) unless it is there."""
    prefix = rt.data_prefix()
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
        if rt.hotkey not in rt.roster.in_slot(self.slot.name):
            holders = ", ".join(rt.roster.in_slot(self.slot.name)) or "nobody"
            raise ConfigError(
                f"this wallet's hotkey {rt.hotkey} does not fill slot {self.slot.name} "
                f"(filled by {holders}); peers would not follow its versions"
            )
        # None for a slot that merges no updates (consensus, a grant-only lead, a collector)
        self.grads = rt.lane_read(self.slot, ObjectKind.GRADIENT.value)
        # None in topologies without scorers: merge weights then come from units or equality.
        # A slot reading consensus weights treats them as its one trusted report.
        self.scores = rt.lane_read(self.slot, ObjectKind.SCORES.value) or rt.lane_read(
            self.slot, ObjectKind.WEIGHTS.value
        )
        # Senders caught serving other bytes than a validator scored: named in a next version
        self.caught = Caught()
        self.admitted: list[str] | None = None  # the trainers ``admit`` let in (None: not run)

    def setup(self) -> None:
        """Publish the dataset to our bucket; build the model, outer optimizer and publisher."""
        rt, p = self.rt, self.rt.cfg.protocol
        publish_dataset(rt)
        self.data: TokenDataset = rt.dataset()
        model = build_model(p.model, vocab_size=self.data.vocab_size, seed=p.seed)
        plan = rt.plan
        self.aggregation = AGGREGATION_RULES[plan.aggregation["rule"]](p, plan.aggregation)
        outer = build_outer_optimizer(OUTER_RULES[plan.outer["name"]](p, plan.outer))
        self.compressor = build_compressor(p.compression)
        # Versions go in the key space of the model lane the slot writes (else the one it reads).
        written = [
            s.lane
            for s in self.slot.steps
            if s.lane and plan.lanes[s.lane].kind == ObjectKind.MODEL_MANIFEST.value
        ]
        lane = written[0] if written else rt.lane_read(self.slot, ObjectKind.MODEL_MANIFEST.value)
        try:  # the sparse broadcast's error feedback, or None for lossless patches
            sparse = uses_sparse_broadcast(p.broadcast, p.compression)
        except ValueError as exc:
            raise ConfigError(f"--protocol.broadcast: {exc}") from None
        broadcast = Resparsifier(p.compression, p.broadcast_budget) if sparse else None
        publisher = VersionPublisher(
            rt.store,
            rt.signer,
            p.run,
            checkpoint_every=p.checkpoint_every,
            max_bytes=max(rt.max_bytes, checkpoint_bytes(model)),
            lane=lane,
        )
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        guard = PersistenceGuard(shapes, p.compression.chunk) if self.aggregation.guard else None
        self.own = ModelLine(model, outer, publisher, lane, broadcast=broadcast, guard=guard)
        self.line = self.own  # the line merged and published now (a sweep point's, lent)
        self.points = Points(self)  # one model per sweep point, if the slot's steps name any
        self.points.build()

    def merge(self, step: Step) -> MergeResult:
        """The ``merge`` action: merge the window and publish the next model version (with
        ``per_point``: each sweep point's workers into that point's model)."""
        if step.params.get("per_point") and self.points.lines:
            return self.points.merge(step.window)
        result = self.step(step.window)
        self.publish(step.window, result)
        return result

    admit = admit
    consensus = consensus
    fan_out = fan_out
    final_merge = final_merge
    grant_data = grant_data
    actions: ClassVar[dict[str, Action]] = {
        "merge": merge,
        "admit": admit,
        "consensus": consensus,
        "fan_out": fan_out,
        "final_merge": final_merge,
        "grant_data": grant_data,
    }
    gates = GATES  # the conditions a step of the plan may wait for
    stop_rules = STOP_RULES
    params: ClassVar[Mapping[str, type[StepParams]]] = {
        "merge": MergeParams,
        "fan_out": FanOutParams,
        "grant_data": GrantParams,
    }
    # The line it advances now: its own, or a sweep point's while that point merges
    model = OnLine()
    outer = OnLine()
    publisher = OnLine()
    model_lane = OnLine()
    version = OnLine()
    unpublished = OnLine()
    broadcast = OnLine()
    pending_delta = OnLine()
    guard = OnLine()  # the persistence guard (its own line only)
    saved = ("own", "caught", "admitted", "points")
    rebuilt = ("grads", "scores", "data", "aggregation", "compressor", "line")

    def trusted(self) -> set[str]:
        """Scorers whose reports count: writers of the score lane holding ``runs.score``."""
        if self.scores is None:
            return set()
        roster = self.rt.roster
        if self.rt.lane(self.scores).kind == ObjectKind.WEIGHTS.value:
            return set(self.rt.writers(self.scores))  # the consensus slot's members
        return {hk for hk in self.rt.writers(self.scores) if roster.may(hk, "runs.score")}

    def resume(self) -> None:
        """Continue from local state, or from what the bucket says was published last."""
        super().resume()
        self.points.resume()
        if "model" not in self.slot.holds:
            return  # a slot that holds no model (consensus, a grant-only lead) publishes none
        own = None if self.unpublished is not None or self.version is None else self.version
        published = self.publisher.resume(None if own is None else (own, snapshot(self.model)))
        if published is None:  # a new run: the seeded initial model is version 0
            manifest = self.publisher.publish(snapshot(self.model), window=-1)
            self.version = manifest.version
            self._log_version(-1, manifest.version, contributors={}, digest=manifest.digest)
            self.save()
        elif self.version is None or published.version > self.version:
            # Local state is missing or older than the bucket (a crash after publishing).
            load_parameters(self.model, self.publisher.latest_state)
            self.version, self.unpublished = published.version, None
            self.last_window = max(self.last_window, published.window)
            logger.info("continuing from published model version {}", published.version)

    def step(self, window: int, senders: list[str] | None = None) -> MergeResult:
        """Merge ``window``'s uploads into the model (publication is :meth:`publish`); from
        ``senders`` only, when given (a sweep point's workers)."""
        # A merge whose publication failed (or was cut by a crash) goes out first, byte for byte
        # the same state; a window already merged is never merged again.
        pending = self.unpublished
        self.publish_pending(None)
        if pending is not None and pending >= window:
            return MergeResult(window, False)
        started = time.perf_counter()
        trusted = self.trusted()
        signed = self._read_reports(window, trusted)
        params = snapshot(self.model)
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        got = self._collect(window, senders, shapes)
        reports = self._bind(window, signed, got)
        # Units when nobody scored: the samples each receipt proves trained (the whole
        # assignment, or the prefix a partial upload names), never a number the miner claims.
        units = {hk: got.accepted[hk].samples or samples_per_window(self.rt) for hk in got.accepted}
        weights = MERGE_WEIGHTS[self.rt.plan.merge_weights](reports, trusted, units)
        if nobody_scored(reports, trusted - {self.rt.hotkey}, set(got.accepted)):
            # Scorers exist but none scored an upload (down, stalled, or their reports were
            # refused): weighting by units now would give any noise miner full weight.
            logger.warning(
                "window {}: no usable score for any of {} uploads; not merging",
                window,
                len(got.accepted),
            )
            log_uploads(self.rt.metrics, window, got, {}, len(reports), empty="no usable score")
            return MergeResult(window, False)
        chosen = [hk for hk in sorted(got.accepted) if weights.get(hk, 0.0) > 0]
        log_uploads(self.rt.metrics, window, got, weights, len(reports))
        if not chosen:
            # No upload, or every one scored and none proved a gain (docs/validator.md).
            zero = ", ".join(f"{hk[:8]} {weights.get(hk, 0.0):.4f}" for hk in sorted(got.accepted))
            why = f": no positive weight from {len(reports)} report(s) ({zero})" if zero else ""
            logger.info(
                "window {}: nothing to merge ({} uploads){}", window, len(got.accepted), why
            )
            return MergeResult(window, False, weights)
        params = self._apply(window, params, shapes, {hk: weights[hk] for hk in chosen}, got)
        n_params = sum(t.numel() for t in params.values())
        merged = {hk: got.accepted[hk] for hk in chosen}
        return MergeResult.of(
            window,
            merged,
            weights,
            n_params,
            self.rt.cfg.protocol.inner.steps,
            len(reports),
            time.perf_counter() - started,
        )

    def _collect(self, window: int, senders: list[str] | None, shapes: dict) -> WindowUploads:
        """The window's uploads from ``senders`` (default: the lane's writers), read and
        screened: each norm (what clipping reads) as its payload is validated, one sender at a
        time, so one whose reading fails is refused (``unreadable``) and the others are
        merged."""
        if senders is None:
            senders = tree_senders(self.rt, self.grads) or self.rt.writers(self.grads)
        miners = [hk for hk in senders if hk != self.rt.hotkey]
        assigned = DATA_RULES[lane_data_rule(self.rt.plan, self.grads)](self.rt, self.data, window)
        got = collect_uploads(
            self.rt,
            window,
            miners,
            base_version=self.version,
            compressor=self.compressor,
            shapes=shapes,
            assigned=assigned,
            lane=self.grads,
            measure=lambda payload: self.compressor.norm(payload, shapes),
        )
        return got

    def _bind(self, window: int, signed: dict, got: WindowUploads) -> dict:
        """Each validator's scores, bound to the bytes it scored: a miner that served this
        holder other bytes (or rewrote its upload after the scoring) is merged at 0, and named
        in the next version with the seal read here, so validators holding the seal of what
        they scored can prove it signed two payloads (``equivocation.py``)."""
        fetched = {hk: u.sha256 for hk, u in got.accepted.items()}
        reports = {
            v: scores if digests is None else bind_scores(scores, digests, fetched)
            for v, (scores, digests) in signed.items()
        }
        votes = Counter(
            hk
            for _, digests in signed.values()
            if digests is not None
            for hk in contradicted([digests], fetched)
        )
        self.caught.add(window, votes, {hk: got.accepted[hk].seal for hk in votes})
        if votes:
            logger.warning(
                "window {}: {} sender(s) served this holder other bytes than a validator "
                "scored: {}",
                window,
                len(votes),
                ", ".join(hk[:8] for hk in sorted(votes)),
            )
        return reports

    def _apply(
        self, window: int, params: dict, shapes: dict, weights: dict[str, float], got: WindowUploads
    ) -> dict:
        """Merge the chosen uploads at ``weights`` and take the outer step; saved before it is
        published, so a crash while publishing resumes with this exact merge (and momentum)."""
        payloads = {hk: got.accepted[hk].payload for hk in weights}
        delta = merge_payloads(
            self.compressor,
            list(payloads.values()),
            shapes,
            list(weights.values()),
            self.aggregation,
            self._guarded(window, payloads, shapes),
        )
        # Weights sum to at most 1 (``scoring.merge.cap_shares``): the mass no sender may
        # take this window is not merged, so a few verified senders take a smaller step.
        mass = sum(weights.values())
        if mass < 1.0:
            delta = {name: t * mass for name, t in delta.items()}
        params = self._outer_step(params, delta, window)
        load_parameters(self.model, params)
        self.unpublished = window
        self.save()
        return params

    def _guarded(self, window: int, payloads: dict, shapes: dict) -> list | None:
        """The persistence guard's transforms of the merged uploads (``subnet.training.guard``),
        None without one; what it held back goes to the metrics (``guard``)."""
        if self.guard is None:
            return None
        decode = partial(self.compressor.decode, shapes=shapes)
        transforms, held = self.guard.transforms(payloads, decode)
        self.guard.forget(set(self.rt.writers(self.grads)) if self.grads else set(payloads))
        if held:
            self.rt.metrics.log("guard", window=window, held=held)
        return transforms

    def _outer_step(
        self, params: dict[str, torch.Tensor], delta: dict[str, torch.Tensor], window: int
    ) -> dict[str, torch.Tensor]:
        """The outer step from ``params``; with the sparse broadcast, re-sparsified (the state
        peers rebuild from the published delta), the delta kept to publish with it."""
        base = {k: v.clone() for k, v in params.items()} if self.broadcast else None
        self.outer.step(params, delta)
        if self.broadcast is None or base is None:
            return params
        published, sparse = self.broadcast.reduce(base, params)
        self.pending_delta = (window, sparse)
        return published

    def reports(self, window: int, trusted: set[str]) -> dict[str, dict[str, float]]:
        """Window scores from each trusted validator's signed report (bad ones are skipped)."""
        return {hk: scores for hk, (scores, _) in self._read_reports(window, trusted).items()}

    def _read_reports(
        self, window: int, trusted: set[str]
    ) -> dict[str, tuple[dict[str, float], dict[str, str] | None]]:
        """Each trusted validator's signed report: its scores, and the payload digest each
        score is for (None for consensus weights, which name no payloads)."""
        out: dict[str, tuple[dict[str, float], dict[str, str] | None]] = {}
        inbox, limit = self.rt.inbox(self.scores), self.rt.max_bytes
        for hotkey in sorted(trusted):
            reader = self.rt.readers.get(hotkey)
            if reader is None:
                continue
            kind = ObjectKind(self.rt.lane(self.scores).kind)  # scores, or consensus weights
            try:  # the schema and the plan checked where the envelope is accepted
                envelope = inbox.fetch(reader, kind, window, hotkey, max_bytes=limit)
                if kind == ObjectKind.SCORES:
                    report = envelope.message(ScoreReportMeta)
                    out[hotkey] = (report.scores, report.digests)
                else:
                    weights = envelope.message(WeightsMeta)
                    out[hotkey] = (weights.scores or weights.weights or {}, None)
            except (StorageError, Rejected) as error:
                logger.info("no usable report from {} for window {}: {}", hotkey[:8], window, error)
            except Exception as error:  # noqa: BLE001 - that validator's voice, not the merge
                log = logger.opt(exception=error)
                log.warning("report of {} for window {} broke its reader", hotkey[:8], window)
        return out

    def publish(self, window: int, result: MergeResult) -> None:
        """Publish a merged window as the next model version."""
        if result.merged:
            self.publish_pending(result)

    def publish_pending(self, result: MergeResult | None) -> None:
        """Publish the merged model as the next version (nothing to do if it is out already).

        ``result`` is None for a merge retried from an earlier window: its figures are gone.
        """
        if self.unpublished is None:
            return
        pending = self.pending_delta
        delta = pending[1] if pending is not None and pending[0] == self.unpublished else None
        manifest = self.publisher.publish(
            snapshot(self.model), self.unpublished, delta, self.caught.naming()
        )
        self.version, window, self.unpublished = manifest.version, self.unpublished, None
        self.caught.named(manifest.equivocations)
        self.pending_delta = None
        fields = result.fields() if result is not None else {}
        contributors = fields.pop("weights", {})
        self._log_version(
            window,
            manifest.version,
            contributors=contributors,
            digest=manifest.digest,
            named=sorted(manifest.equivocations),
            **fields,
        )

    def heldout_loss(self) -> float:
        """The held-out loss of the model of the line advanced now."""
        return evaluate_loss(self.model, self.data.heldout_batches(8, max_batches=4))

    def _log_version(self, window: int, version: int, **fields: Any) -> None:
        loss = self.heldout_loss()
        logger.info("model version {} (window {}): held-out loss {:.4f}", version, window, loss)
        self.rt.metrics.log(
            "version",
            window=window,
            version=version,
            heldout_loss=loss,
            lane=self.model_lane or "model",
            **fields,
            **self.rt.meter.take(),
        )

    def state(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Model, outer optimizer state, the last and the pending version."""
        own = self.own  # also while a sweep point's line is merged
        points_meta, points = self.points.state()
        tensors = {
            **prefixed(snapshot(own.model), "model"),
            **prefixed(own.outer.state_dict(), "outer"),
            **points,
        }
        meta = {
            "version": own.version,
            "unpublished": own.unpublished,
            "caught": self.caught.state(),
            "admitted": self.admitted,
            **points_meta,
        }
        if own.guard is not None:  # the persistence guard: its secret sketch and memory
            guard = own.guard.state_dict()
            meta["guard_seed"] = guard["seed"]
            tensors.update(prefixed(guard["memory"], "guard"))
        if own.broadcast is not None:  # its error feedback, and a delta not yet published
            tensors.update(prefixed(own.broadcast.state_dict(), "broadcast"))
            if own.pending_delta is not None:
                meta["delta_window"] = own.pending_delta[0]
                tensors.update(prefixed(own.pending_delta[1].payload, "delta"))
        return meta, tensors

    def restore(self, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        """Load what :meth:`state` saved."""
        self.version = meta.get("version")
        self.unpublished = meta.get("unpublished")
        self.caught.restore(meta.get("caught", {}))
        admitted = meta.get("admitted")
        self.admitted = None if admitted is None else [str(hk) for hk in admitted]
        model = unprefixed(tensors, "model")
        if model:
            load_parameters(self.model, model)
        self.outer.load_state_dict(unprefixed(tensors, "outer"))
        if self.own.guard is not None and meta.get("guard_seed") is not None:
            memory = unprefixed(tensors, "guard")
            self.own.guard.load_state_dict({"seed": meta["guard_seed"], "memory": memory})
        if self.broadcast is not None:
            self.broadcast.load_state_dict(unprefixed(tensors, "broadcast"))
            if meta.get("delta_window") is not None:
                payload = unprefixed(tensors, "delta")
                self.pending_delta = (
                    meta["delta_window"],
                    SparseDelta(self.broadcast.codec, payload),
                )
        self.points.restore(meta, tensors)
