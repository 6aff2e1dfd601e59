"""Merging compressed uploads without holding them decoded: the holder's bounded-memory merge.

The holder keeps each accepted upload as its small compressed payload (about 0.35 MB for
``hypertrain-20m`` with ``sparseloco-rice``, against 76 MB decoded) and decodes them one at a time
inside :func:`~subnet.training.aggregation.aggregate_stream`. Norm clipping takes the norms from
the payloads (:meth:`~subnet.compression.Compressor.norm`: codebook arithmetic for the sparse
codecs, a decode for the dense ones), so the merge is a single decoding pass.

Peak memory for ``mean``: the accumulator plus one decoded upload (two model copies) plus the
payloads themselves, independent of how many uploads there are beyond their compressed bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import torch

from subnet.compression import Compressor, Payload
from subnet.training.aggregation import Source, aggregate_stream
from subnet.training.config import AggregationConfig


def payload_sources(
    compressor: Compressor, payloads: Sequence[Payload], shapes: Mapping[str, tuple[int, ...]]
) -> list[Source]:
    """One decode-on-call source per payload (each call validates and decodes afresh)."""
    return [partial(compressor.decode, payload, shapes) for payload in payloads]


def merge_payloads(
    compressor: Compressor,
    payloads: Sequence[Payload],
    shapes: Mapping[str, tuple[int, ...]],
    weights: Sequence[float] | None,
    cfg: AggregationConfig,
) -> dict[str, torch.Tensor]:
    """Aggregate compressed uploads as :func:`~subnet.training.aggregate` would the decoded ones,
    decoding one at a time."""
    norms = [compressor.norm(p, shapes) for p in payloads] if cfg.clip_to_median_norm else None
    return aggregate_stream(payload_sources(compressor, payloads, shapes), weights, cfg, norms)
