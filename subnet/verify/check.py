"""The check itself, pure: does a miner's upload come from honest training of its assignment?

The miner's upload is ``C(u)``, SparseLoCo's top-k of ``u = decay * e_in + delta`` per chunk,
where ``delta`` is the window's pseudo-gradient and ``e_in`` its error feedback; it keeps
``e_out = u - decode(C(u))``. On the drawn chunks the validator knows ``e_in`` and ``e_out``
(proven against the committed roots) and the upload, so it knows the miner's own ``u`` there:
``u_m = e_out + decode(upload)``. It replays the window (from the public model, with a fresh
inner optimizer, on the assigned samples) to get its own ``delta'`` and ``u' = decay * e_in +
delta'``. Two things must hold on every drawn chunk:

1. **The upload is exactly the codec's output of u_m**: its kept positions are the top-k of
   ``|u_m|`` (a difference only at an exact tie), each kept value has ``u_m``'s sign, and no
   value the codec put in the small-magnitude bin is larger than one it put in the large bin.
   For a lossless codec, ``e_out`` is zero.
2. **u_m is the honest input**: ``||u_m - u'|| / ||u'||`` over the drawn chunks is at most the
   tolerance. This compares the codec's input, not its output: honest replays on other kernels,
   thread counts or rank counts differ there by about 1e-6 relative (``bench.py verify``),
   while comparing the 2-bit top-k outputs would turn each near-tie flip into a large error.

What a liar can hide: a deviation under the tolerance (the allowance), or one confined to chunks
the draw did not read. Both are measured in ``bench.py verify`` and stated in docs/protocol.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

TIE = 1e-5  # relative closeness to the k-th magnitude at which a different pick is a tie


@dataclass(frozen=True)
class Chunk:
    """One drawn chunk: what the replay gives and what the miner sent and proved."""

    name: str  # the tensor it belongs to
    replayed: torch.Tensor  # the replay's pseudo-gradient on the chunk
    ef_in: torch.Tensor
    ef_out: torch.Tensor
    sent: torch.Tensor  # the decoded upload on the chunk
    kept: torch.Tensor  # bool: the positions the upload sent
    k: int  # how many positions the codec keeps in this chunk


@dataclass(frozen=True)
class Outcome:
    """A check's result: the input error, and the reason it failed (None: passed)."""

    error: float
    reason: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Whether the upload passed."""
        return self.reason is None


def chunks_for(
    chunks,
    ids: list[int],
    replayed: dict[str, torch.Tensor],
    ef_in: list[torch.Tensor],
    ef_out: list[torch.Tensor],
    decoded: dict[str, torch.Tensor],
    topk: int,
) -> list[Chunk]:
    """The check's view of chunks ``ids`` of a :class:`~subnet.verify.chunks.ChunkMap`: the
    replay's pseudo-gradient, the miner's proven error feedback, its decoded upload."""
    out = []
    rows = zip(
        ids, chunks.chunks(replayed, ids), ef_in, ef_out, chunks.chunks(decoded, ids), strict=True
    )
    for i, values, e_in, e_out, sent in rows:
        name, index, _ = chunks.refs[i]
        layout = chunks.layouts[name]
        k_full, k_tail = layout.kept(topk)
        k = k_tail if layout.tail and index == layout.full else k_full
        out.append(Chunk(name, values, e_in, e_out, sent, sent != 0, k))
    return out


def spread(
    chunks,
    ids: list[int],
    replayed: dict[str, torch.Tensor],
    probe: dict[str, torch.Tensor],
    ef_in: list[torch.Tensor],
    decay: float,
) -> float:
    """How far two honest replays' codec inputs lie apart on chunks ``ids`` (relative L2): the
    window's chaos as the validator measures it (``probe``: the replay with perturbed gradients,
    ``subnet.neuron.replay``). A check's tolerance is at least a margin times this."""
    num = den = 0.0
    rows = zip(chunks.chunks(replayed, ids), chunks.chunks(probe, ids), ef_in, strict=True)
    for a, b, e_in in rows:
        u = decay * e_in.double() + a.double()
        num += float((a.double() - b.double()).pow(2).sum())
        den += float(u.pow(2).sum())
    if not math.isfinite(num) or not math.isfinite(den):
        return math.inf
    return math.sqrt(num / den) if den else (0.0 if num == 0 else math.inf)


def tolerance(floor: float, margin: float, chaos: float | None) -> float:
    """A check's tolerance: ``floor`` (``scoring.check_tolerance``), or ``margin`` times the
    window's measured chaos (:func:`spread`) where that is larger; the validator and the
    verification benchmark both use this one rule."""
    if chaos is None or margin <= 0:
        return floor
    return max(floor, margin * chaos)


def levels(decoded: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each tensor's codebook levels, from its decoded upload (for the bin-order check)."""
    return {name: torch.unique(t[t != 0]) for name, t in decoded.items()}


def _codec_output(chunk: Chunk, claimed: torch.Tensor) -> str | None:
    """Why the upload is not SparseLoCo's output of ``claimed`` on this chunk, or None."""
    kept = chunk.kept
    if int(kept.sum()) != chunk.k:
        return f"{int(kept.sum())} positions sent, the codec keeps {chunk.k}"
    mag = claimed.abs()
    kth = float(torch.topk(mag, chunk.k).values[-1]) if chunk.k else 0.0
    tie = TIE * max(kth, 1e-30)
    if bool((mag[kept] < kth - tie).any()) or bool((mag[~kept] > kth + tie).any()):
        return "the positions sent are not the top-k of the error feedback plus the update"
    signed = claimed[kept]
    sent = chunk.sent[kept]
    wrong_sign = ((sent < 0) != (signed < 0)) & (signed.abs() > tie)
    if bool(wrong_sign.any()):
        return "a value sent with the wrong sign"
    return None


def _bins(
    chunks: list[Chunk], claimed: list[torch.Tensor], books: dict[str, torch.Tensor]
) -> str | None:
    """Per tensor: no value coded small is larger than one coded large (SparseLoCo's one
    threshold per tensor). ``books``: each tensor's codebook levels (:func:`levels`)."""
    by_tensor: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for chunk, u in zip(chunks, claimed, strict=True):
        by_tensor.setdefault(chunk.name, []).append((chunk.sent[chunk.kept], u[chunk.kept]))
    for name, parts in by_tensor.items():
        sent = torch.cat([p[0] for p in parts])
        u = torch.cat([p[1] for p in parts]).abs()
        book = books.get(name, torch.zeros(0))
        big = torch.zeros_like(sent, dtype=torch.bool)
        known = torch.zeros_like(sent, dtype=torch.bool)
        for negative in (True, False):
            side = (sent < 0) if negative else (sent >= 0)
            own = book[book < 0] if negative else book[book >= 0]
            if own.unique().numel() < 2:  # one level on this side: its bin cannot be told
                continue
            known |= side
            big |= side & (sent.abs() >= float(own.abs().max()))
        small = known & ~big
        if bool(big.any()) and bool(small.any()):
            if float(u[small].max()) > float(u[big].min()) * (1 + TIE):
                return f"{name}: a value coded small is larger than one coded large"
    return None


def input_error(chunks: list[Chunk], decay: float) -> float:
    """``||u_m - u'|| / ||u'||`` over ``chunks``: the codec input the miner proves (its error
    feedback after plus what it sent) against the replay's (``decay x e_in + delta'``)."""
    num = den = 0.0
    for chunk in chunks:
        u = chunk.ef_out.double() + chunk.sent.double()
        honest = decay * chunk.ef_in.double() + chunk.replayed.double()
        num += float((u - honest).pow(2).sum())
        den += float(honest.pow(2).sum())
    return 0.0 if den == 0.0 and num == 0.0 else math.sqrt(num / den) if den else math.inf


def check(
    chunks: list[Chunk],
    decay: float,
    tolerance: float,
    codec: str = "sparse",
    books: dict[str, torch.Tensor] | None = None,
) -> Outcome:
    """Check the drawn ``chunks`` (see the module doc). ``codec``: ``sparse`` (SparseLoCo:
    ``books`` are each tensor's codebook levels, :func:`levels`), ``lossless`` or ``other``."""
    sparse, lossless = codec == "sparse", codec == "lossless"
    claimed: list[torch.Tensor] = []
    for chunk in chunks:
        tensors = (chunk.replayed, chunk.ef_in, chunk.ef_out, chunk.sent)
        if not all(bool(torch.isfinite(t).all()) for t in tensors):
            return Outcome(math.inf, "check_non_finite", "a value that is not finite")
        u = chunk.ef_out.double() + chunk.sent.double()
        claimed.append(u)
        if lossless and bool((chunk.ef_out != 0).any()):
            return Outcome(math.inf, "check_codec", "a lossless codec left error feedback")
        if sparse:
            why = _codec_output(chunk, u)
            if why is not None:
                return Outcome(math.inf, "check_codec", f"{chunk.name}: {why}")
    if sparse:
        why = _bins(chunks, claimed, books or {})
        if why is not None:
            return Outcome(math.inf, "check_codec", why)
    error = input_error(chunks, decay)
    if not error <= tolerance:
        detail = f"the replay's input differs by {error:.3g} (tolerance {tolerance:g})"
        return Outcome(error, "check_mismatch", detail)
    return Outcome(error)
