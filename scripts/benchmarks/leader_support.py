"""Uploads on one shared support per round (ScaleCom's cyclic local top-k), for measurement only.

Chen et al., "ScaleCom: Scalable Sparsified Gradient Compression for Communication-Efficient
Distributed Training" (NeurIPS 2020): each round one worker, the leader (round-robin), picks the
top-k indices of its own error-feedback accumulator per chunk, and every worker sends its values
at those indices. The merge of R uploads then has one upload's support instead of up to R times
it, so a broadcast of one upload's budget carries the whole merge. ``bench.py broadcast --loss
--upload-support leader`` trains SparseLoCo that way to see what it costs against independent
top-k; Beam's protocol does not do this (a leader's indices would have to be published before the
others upload).
"""

from __future__ import annotations

import torch

from benchmarks.common import envelope_bytes
from subnet.compression.sparseloco import quantize_2bit
from subnet.training import InnerConfig, load_parameters, pseudo_gradient, train_inner


def _at(sparse, tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``tensor``'s values at chunk-local ``indices`` in chunk order (as ``select`` returns)."""
    layout = sparse.layout(tuple(tensor.shape))
    k_full, _ = layout.kept(sparse.topk)
    full, tail = layout.split(tensor)
    cut = layout.full * k_full
    parts = [torch.gather(full, 1, indices[:cut].reshape(layout.full, k_full)).reshape(-1)]
    parts.append(tail[indices[cut:]])
    return torch.cat(parts)


def leader_round(
    workers: list,
    feedback: list,
    streams: list,
    start: dict,
    rnd: int,
    inner: InnerConfig,
    compressor,
) -> tuple[list, int]:
    """One round of every worker from ``start``, each sending 2-bit values at the leader's
    top-k (leader ``rnd % R``); the decoded updates and the bytes uploaded (as many as an
    ordinary upload: the same indices and values; a real protocol would spare the indices)."""
    accs = []
    for worker, ef, stream in zip(workers, feedback, streams, strict=True):
        load_parameters(worker, start)
        train_inner(worker, stream[rnd * inner.steps : (rnd + 1) * inner.steps], inner)
        update = pseudo_gradient(start, worker)
        accs.append(
            {
                n: v.detach().float().clone()
                if n not in ef.buffers
                else ef.buffers[n].mul(ef.decay).add_(v.detach().float())
                for n, v in update.items()
            }
        )
    sparse = getattr(compressor, "sparse", compressor)  # sparseloco-rice wraps sparseloco
    leader = accs[rnd % len(accs)]
    support = {n: sparse.select(t)[0] for n, t in leader.items()}
    decoded, up = [], 0
    for ef, acc in zip(feedback, accs, strict=True):
        out = {}
        for name, tensor in acc.items():
            codebook, codes = quantize_2bit(_at(sparse, tensor, support[name]))
            out[name] = sparse.scatter(support[name], codebook[codes], tuple(tensor.shape))
        ef.buffers = {n: acc[n] - out[n] for n in acc}
        up += envelope_bytes(compressor.encode(out))
        decoded.append(out)
    return decoded, up
