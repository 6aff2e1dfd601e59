"""The holder's merge: one window's uploads into the model line it advances now.

It reads the trusted score reports (``score_reads.py``), fetches and screens the uploads
(``uploads.collect_uploads``), binds each score to the bytes it scored (a sender that served
this holder other bytes is merged at 0 and caught, ``equivocation.Caught``), weights the senders
by the plan's merge-weights rule, aggregates the chosen uploads robustly (the persistence guard
first, where the aggregation asks for it), takes the outer step (re-sparsified under the sparse
broadcast) and saves the holder's state before the version goes out (``releases.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from functools import partial

import torch
from loguru import logger

from ..compression import Compressor
from ..data import TokenDataset
from ..scoring.report import bind_scores, contradicted, nobody_scored
from ..training import load_parameters, snapshot
from ..training.config import AggregationConfig
from ..training.streaming import merge_payloads
from .actions.tree import tree_senders
from .bindings import lane_data_rule, samples_per_window
from .equivocation import Caught
from .merge_result import MergeResult
from .model_line import ModelLine
from .rules import DATA_RULES, MERGE_WEIGHTS
from .runtime import Runtime
from .score_reads import ScoreReads, Signed
from .uploads import WindowUploads, collect_uploads, log_uploads

Shapes = dict[str, tuple[int, ...]]


class Merger:
    """Merges a window into the line the holder advances now (no state of its own: what a
    merge leaves, the line and the caught senders keep)."""

    def __init__(
        self,
        rt: Runtime,
        grads: str | None,
        reads: ScoreReads,
        caught: Caught,
        codec: tuple[TokenDataset, AggregationConfig, Compressor],
        line: Callable[[], ModelLine],
        publish_pending: Callable[[MergeResult | None], None],
        save: Callable[[], None],
    ) -> None:
        self.rt, self.grads, self.reads, self.caught = rt, grads, reads, caught
        # the dataset (whose samples each sender was assigned), aggregation rule and codec
        self.data, self.aggregation, self.compressor = codec
        self.line = line  # the line the holder advances now (its own, or a sweep point's)
        self.publish_pending = publish_pending  # publishes that line's merge not yet out
        self.save = save  # the holder's state, saved before a merge is published

    def merge(self, window: int, senders: list[str] | None = None) -> MergeResult:
        """Merge ``window``'s uploads into the line (publication is the holder's); from
        ``senders`` only, when given (a sweep point's workers)."""
        # A merge whose publication failed (or was cut by a crash) goes out first, byte for byte
        # the same state; a window already merged is never merged again.
        line = self.line()
        pending = line.unpublished
        self.publish_pending(None)
        if pending is not None and pending >= window:
            return MergeResult(window, False)
        started = time.perf_counter()
        trusted = self.reads.trusted()
        signed = self.reads.signed(window, trusted)
        params = snapshot(line.model)
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        got = self._collect(line, window, senders, shapes)
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
            return self._nothing(window, got, weights, len(reports))
        params = self._apply(line, window, params, {hk: weights[hk] for hk in chosen}, got)
        n_params = sum(t.numel() for t in params.values())
        merged = {hk: got.accepted[hk] for hk in chosen}
        steps, seconds = self.rt.cfg.protocol.inner.steps, time.perf_counter() - started
        return MergeResult.of(window, merged, weights, n_params, steps, len(reports), seconds)

    def _nothing(
        self, window: int, got: WindowUploads, weights: dict[str, float], reports: int
    ) -> MergeResult:
        """No upload, or every one scored and none proved a gain (docs/validator.md)."""
        zero = ", ".join(f"{hk[:8]} {weights.get(hk, 0.0):.4f}" for hk in sorted(got.accepted))
        why = f": no positive weight from {reports} report(s) ({zero})" if zero else ""
        logger.info("window {}: nothing to merge ({} uploads){}", window, len(got.accepted), why)
        return MergeResult(window, False, weights)

    def _collect(
        self, line: ModelLine, window: int, senders: list[str] | None, shapes: Shapes
    ) -> WindowUploads:
        """The window's uploads from ``senders`` (default: the lane's writers), read and
        screened: each norm (what clipping reads) as its payload is validated, one sender at a
        time, so one whose reading fails is refused (``unreadable``) and the others are
        merged."""
        if senders is None:
            senders = tree_senders(self.rt, self.grads) or self.rt.writers(self.grads)
        miners = [hk for hk in senders if hk != self.rt.hotkey]
        assigned = DATA_RULES[lane_data_rule(self.rt.plan, self.grads)](self.rt, self.data, window)
        return collect_uploads(
            self.rt,
            window,
            miners,
            base_version=line.version,
            compressor=self.compressor,
            shapes=shapes,
            assigned=assigned,
            lane=self.grads,
            measure=lambda payload: self.compressor.norm(payload, shapes),
        )

    def _bind(self, window: int, signed: Signed, got: WindowUploads) -> dict:
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
        self,
        line: ModelLine,
        window: int,
        params: dict[str, torch.Tensor],
        weights: dict[str, float],
        got: WindowUploads,
    ) -> dict[str, torch.Tensor]:
        """Merge the chosen uploads at ``weights`` and take the outer step; saved before it is
        published, so a crash while publishing resumes with this exact merge (and momentum)."""
        shapes = {k: tuple(v.shape) for k, v in params.items()}
        payloads = {hk: got.accepted[hk].payload for hk in weights}
        delta = merge_payloads(
            self.compressor,
            list(payloads.values()),
            shapes,
            list(weights.values()),
            self.aggregation,
            self._guarded(line, window, payloads, shapes),
            [got.accepted[hk].measured for hk in weights],  # each norm, read at collect
        )
        # Weights sum to at most 1 (``scoring.merge.cap_shares``): the mass no sender may
        # take this window is not merged, so a few verified senders take a smaller step.
        mass = sum(weights.values())
        if mass < 1.0:
            delta = {name: t * mass for name, t in delta.items()}
        params = self._outer_step(line, params, delta, window)
        load_parameters(line.model, params)
        line.unpublished = window
        self.save()
        return params

    def _guarded(self, line: ModelLine, window: int, payloads: dict, shapes: Shapes) -> list | None:
        """The persistence guard's transforms of the merged uploads (``subnet.training.guard``),
        None without one; what it held back goes to the metrics (``guard``)."""
        if line.guard is None:
            return None
        decode = partial(self.compressor.decode, shapes=shapes)
        transforms, held = line.guard.transforms(payloads, decode)
        line.guard.forget(set(self.rt.writers(self.grads)) if self.grads else set(payloads))
        if held:
            self.rt.metrics.log("guard", window=window, held=held)
        return transforms

    def _outer_step(
        self,
        line: ModelLine,
        params: dict[str, torch.Tensor],
        delta: dict[str, torch.Tensor],
        window: int,
    ) -> dict[str, torch.Tensor]:
        """The outer step from ``params``; with the sparse broadcast, re-sparsified (the state
        peers rebuild from the published delta), the delta kept to publish with it."""
        base = {k: v.clone() for k, v in params.items()} if line.broadcast else None
        line.outer.step(params, delta)
        if line.broadcast is None or base is None:
            return params
        published, sparse = line.broadcast.reduce(base, params)
        line.pending_delta = (window, sparse)
        return published
