"""The holder's publication: each merged window of a model line goes out as its next version.

A line's merge not yet published (``ModelLine.unpublished``) goes out with the sparse step kept
for it (the sparse broadcast) and the senders caught equivocating (``equivocation.Caught``),
then the ``version`` metric and log line record it with the merge's figures and the held-out
loss. On a start the line continues from what its bucket says was published last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger

from ..data import TokenDataset
from ..model import evaluate_loss
from ..training import load_parameters, snapshot
from .equivocation import Caught
from .merge_result import MergeResult
from .model_line import ModelLine
from .runtime import Runtime


class Releases:
    """Publishes the versions of whichever line it is handed (no state of its own: a line's
    version and pending merge are the line's)."""

    def __init__(
        self, rt: Runtime, data: TokenDataset, caught: Caught, save: Callable[[], None]
    ) -> None:
        self.rt = rt
        self.data = data
        self.caught = caught  # whom the next version names
        self.save = save  # the holder's state, saved after version 0

    def resume(self, line: ModelLine) -> int | None:
        """Continue ``line`` from local state, or from what the bucket says was published last;
        the window of a version read back from the bucket (local state was older), else None."""
        own = None if line.unpublished is not None or line.version is None else line.version
        published = line.publisher.resume(None if own is None else (own, snapshot(line.model)))
        if published is None:  # a new run: the seeded initial model is version 0
            manifest = line.publisher.publish(snapshot(line.model), window=-1)
            line.version = manifest.version
            self.log_version(line, -1, manifest.version, contributors={}, digest=manifest.digest)
            self.save()
        elif line.version is None or published.version > line.version:
            # Local state is missing or older than the bucket (a crash after publishing).
            load_parameters(line.model, line.publisher.latest_state)
            line.version, line.unpublished = published.version, None
            logger.info("continuing from published model version {}", published.version)
            return published.window
        return None

    def publish_pending(self, line: ModelLine, result: MergeResult | None) -> None:
        """Publish ``line``'s merged model as its next version (nothing to do if it is out).

        ``result`` is None for a merge retried from an earlier window: its figures are gone.
        """
        if line.unpublished is None:
            return
        pending = line.pending_delta
        delta = pending[1] if pending is not None and pending[0] == line.unpublished else None
        manifest = line.publisher.publish(
            snapshot(line.model), line.unpublished, delta, self.caught.naming()
        )
        line.version, window, line.unpublished = manifest.version, line.unpublished, None
        self.caught.named(manifest.equivocations)
        line.pending_delta = None
        fields = result.fields() if result is not None else {}
        contributors = fields.pop("weights", {})
        self.log_version(
            line,
            window,
            manifest.version,
            contributors=contributors,
            digest=manifest.digest,
            named=sorted(manifest.equivocations),
            **fields,
        )

    def heldout_loss(self, line: ModelLine) -> float:
        """The held-out loss of ``line``'s model."""
        return evaluate_loss(line.model, self.data.heldout_batches(8, max_batches=4))

    def log_version(self, line: ModelLine, window: int, version: int, **fields: Any) -> None:
        """The ``version`` metric and log line of a version of ``line`` just published."""
        loss = self.heldout_loss(line)
        logger.info("model version {} (window {}): held-out loss {:.4f}", version, window, loss)
        self.rt.metrics.log(
            "version",
            window=window,
            version=version,
            heldout_loss=loss,
            lane=line.model_lane or "model",
            **fields,
            **self.rt.meter.take(),
        )
