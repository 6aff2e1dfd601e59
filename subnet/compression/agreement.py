"""Is a SparseLoCo payload an honest encoding of an input close to a reference input?

Two honest computations of the same pseudo-gradient (another rank count, kernel path, thread
count or machine) agree only up to the order of floating-point sums: about 1e-5 of the input's
L2 norm (``docs/benchmarks.md``, "Numerics across kernel paths"). SparseLoCo's payload is not
continuous in its input: which coordinates a chunk's top-k keeps, and which side of the
quantization threshold a kept value falls, flip at near-ties. So two honest payloads are
compared in the codec's *input* domain: payload ``B`` agrees with reference input ``a`` when
some input ``b`` with ``||b - a||_2 <= rtol * ||a||_2`` could have produced it.

:func:`agreement` checks that with lower bounds on ``||b - a||_2`` that the payload forces, one per
family of constraint; each family sums over disjoint coordinates, so each bound is valid:

* **support** -- in every chunk each kept magnitude must be at least each dropped one: pairing
  the ``p``-th smallest kept ``|a|`` with the ``p``-th largest dropped ``|a|`` costs
  ``(dropped - kept)_+^2 / 2`` per pair. A coordinate that differs must be a near-tie of the
  chunk's k-th magnitude.
* **sign** -- a code's sign must be the sign of ``b``: ``a_i^2`` for each coordinate whose sign
  the payload contradicts.
* **magnitude** -- "big" codes lie above the median kept magnitude and "small" ones at or below
  it: the same pairing around the quantization threshold, plus the cost of the ties a short count
  of big codes implies (more big codes than half is never honest).
* **codebook** -- each level is the mean of its bin's values: ``count * (level - mean(a))^2``
  beyond fp32 summation error (empty bins hold the median's magnitude).

``distance`` is the largest of the four bounds. Then the decoded update may differ from the
reference's own encoding only by what those near-ties and the budget explain: ``allowance``
bounds it from the reference alone (the most flips the budget can pay for, at the cheapest
near-ties, each moving a coordinate by at most two levels, plus the codebook's drift), and the
payload's ``decoded_gap`` must not exceed it. The allowance is also what a liar may deviate
from an honest upload while passing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from subnet.compression.base import Compressor, Payload, PayloadError, Shapes
from subnet.compression.chunking import ChunkLayout
from subnet.compression.packing import unpack_2bit, unpack_12bit
from subnet.compression.sparseloco import SparseLoCoCompressor, quantize_2bit
from subnet.compression.sparseloco_rice import SparseLoCoRiceCompressor

#: fp32 unit roundoff: the codebook's bin sums are fp32.
_U = 2.0**-24
_FAMILIES = ("support", "sign", "magnitude", "codebook")


@dataclass(frozen=True)
class Selection:
    """One tensor's payload: flat row-major positions of the kept values, their 2-bit codes (same
    order: chunk by chunk, ascending within a chunk) and the tensor's four codebook levels."""

    positions: torch.Tensor  # int64 [kept]
    codes: torch.Tensor  # int64 [kept]
    codebook: torch.Tensor  # float32 [4]


@dataclass(frozen=True)
class Agreement:
    """The verdict of :func:`agreement`, with the figures behind it (L2 norms, absolute)."""

    ok: bool
    reason: str | None  # the first failing check: a family name, "decoded" or a PayloadError's
    distance: float  # lower bound on ||b - a|| over inputs b the payload could honestly encode
    budget: float  # rtol * ||a||
    costs: dict[str, float]  # each family's lower bound on ||b - a||
    support_flips: int  # coordinates the payload keeps that the reference's encoding drops
    code_flips: int  # coordinates both keep, with another 2-bit code
    decoded_gap: float  # ||decode(payload) - decode(encode(a))||
    allowance: float  # the largest decoded gap the budget's near-ties can explain


def sparse_codec(compressor: Compressor) -> SparseLoCoCompressor:
    """The SparseLoCo selection rules behind ``compressor``; TypeError for other codecs."""
    if isinstance(compressor, SparseLoCoRiceCompressor):
        return compressor.sparse
    if isinstance(compressor, SparseLoCoCompressor):
        return compressor
    raise TypeError(f"agreement is defined for the SparseLoCo codecs, not {compressor.info.name}")


def selections(compressor: Compressor, payload: Payload, shapes: Shapes) -> dict[str, Selection]:
    """Every tensor's :class:`Selection`; validates first (raises :class:`PayloadError`)."""
    sparse = sparse_codec(compressor)
    out: dict[str, Selection] = {}
    if isinstance(compressor, SparseLoCoRiceCompressor):
        for name, sel in compressor.parse(payload, shapes).items():
            layout = sparse.layout(tuple(shapes[name]))
            k_full = layout.kept(sparse.topk)[0]
            positions = layout.flat_positions(torch.from_numpy(sel.indices), k_full)
            out[name] = Selection(positions, sel.codes, sel.codebook)
        return out
    reason = sparse.validate(payload, shapes)
    if reason is not None:
        raise PayloadError(reason, sparse.info.name)
    for name, shape in shapes.items():
        layout = sparse.layout(tuple(shape))
        kept = layout.total_kept(sparse.topk)
        indices = unpack_12bit(payload[f"{name}::idx"], kept)
        positions = layout.flat_positions(indices, layout.kept(sparse.topk)[0])
        codes = unpack_2bit(payload[f"{name}::val"], kept)
        out[name] = Selection(positions, codes, payload[f"{name}::cb"])
    return out


def _chunks(layout: ChunkLayout, flat: torch.Tensor, topk: int) -> list[tuple[torch.Tensor, int]]:
    """``flat`` (row-major) cut into its chunk matrices, each with the values it keeps."""
    k_full, k_tail = layout.kept(topk)
    full, tail = layout.split(flat.reshape(layout.shape))
    rows = [(full, k_full)] if layout.full else []
    return rows + ([(tail.reshape(1, -1), k_tail)] if layout.tail else [])


def _support_cost(mag: torch.Tensor, kept: torch.Tensor, k: int) -> float:
    """Pair each chunk's p-th smallest kept magnitude with its p-th largest dropped one."""
    j = min(k, mag.shape[1] - k)
    if j <= 0:
        return 0.0
    inf = torch.tensor(math.inf, dtype=mag.dtype)
    lows = torch.topk(torch.where(kept, mag, inf), j, dim=1, largest=False).values
    highs = torch.topk(torch.where(kept, -inf, mag), j, dim=1).values
    return float((highs - lows).clamp(min=0).pow(2).sum()) / 2


def _pair_cost(high_side: torch.Tensor, low_side: torch.Tensor) -> float:
    """Values of ``low_side`` must all lie above those of ``high_side``: pair extremes."""
    j = min(high_side.numel(), low_side.numel())
    if j == 0:
        return 0.0
    highs = torch.topk(high_side, j).values
    lows = torch.topk(low_side, j, largest=False).values
    return float((highs - lows).clamp(min=0).pow(2).sum()) / 2


def _code_costs(v: torch.Tensor, sel: Selection) -> tuple[float, float, float]:
    """(sign, magnitude, codebook) lower bounds for one tensor, squared; ``v`` = a at the kept
    positions (float64)."""
    codes, book = sel.codes, sel.codebook.double()
    n = v.numel()
    if n == 0:
        return 0.0, 0.0, (0.0 if bool((book == 0).all()) else math.inf)
    negative = codes <= 1
    wrong_sign = torch.where(negative, v >= 0, v < 0)
    sign = float(v[wrong_sign].pow(2).sum())
    mag = v.abs()
    big = (codes == 0) | (codes == 3)
    shortfall = n // 2 - int(big.sum())
    if shortfall < 0:  # more values above the median than half of them: never honest
        return sign, math.inf, 0.0
    # Two bounds over overlapping coordinates: the larger one holds.
    magnitude = _pair_cost(mag[~big], mag[big])
    if shortfall > 0:  # as many ties at the median as big codes are missing
        top = torch.topk(mag[~big], min(shortfall + 1, int((~big).sum()))).values
        magnitude = max(magnitude, float((top - top.mean()).pow(2).sum()))
    means = empty = 0.0  # the bins' means (disjoint: they add up); an empty bin's level
    for code in range(4):
        in_bin = codes == code
        count = int(in_bin.sum())
        if count:
            values = v[in_bin]
            slop = (count + 1) * _U * float(values.abs().mean())
            gap = abs(float(book[code]) - float(values.mean())) - slop
            means += count * max(gap, 0.0) ** 2
        else:  # an empty bin holds +-t, t the median kept magnitude; |t_b - t_a| <= ||b - a||
            t = float(mag.median())
            gap = abs(float(book[code]) - (-t if code <= 1 else t)) - 2 * _U * t
            empty = max(empty, max(gap, 0.0) ** 2)
    return sign, magnitude, max(means, empty)


def _near_ties(mag: torch.Tensor, k: int) -> torch.Tensor:
    """Per-pair cost of the cheapest support flips of each chunk of the reference."""
    j = min(k, mag.shape[1] - k)
    if j <= 0:
        return mag.new_zeros(0)
    top = torch.topk(mag, k + j, dim=1).values  # descending
    lows = top[:, :k].flip(1)[:, :j]  # the smallest kept, ascending
    return (lows - top[:, k : k + j]).pow(2).reshape(-1) / 2


def _affordable(costs: list[torch.Tensor], budget_sq: float) -> int:
    """How many of these (independent) changes, cheapest first, the squared budget pays for."""
    flat = torch.cat(costs) if costs else torch.zeros(0, dtype=torch.float64)
    return int((torch.cumsum(flat.sort().values, 0) <= budget_sq).sum())


def _allowance(
    sparse: SparseLoCoCompressor, reference: Mapping[str, torch.Tensor], budget: float
) -> float:
    """Upper bound on ||decode(enc(b)) - decode(enc(a))|| over ||b - a|| <= budget."""
    support, sign, magnitude, bins = [], [], [], []
    level = 0.0
    for tensor in reference.values():
        a = tensor.detach().double().reshape(-1)
        layout = sparse.layout(tuple(tensor.shape))
        level = max(level, float(a.abs().max()) if a.numel() else 0.0)
        for mag, k in _chunks(layout, a.abs(), sparse.topk):
            support.append(_near_ties(mag, k))
        _, values = sparse.select(tensor.detach().float())
        _, codes = quantize_2bit(values)
        v = values.double()
        sign.append(v.pow(2))
        big = (codes == 0) | (codes == 3)
        mag = v.abs()
        j = min(int(big.sum()), int((~big).sum()))
        if j:
            lows = torch.topk(mag[big], j, largest=False).values
            highs = torch.topk(mag[~big], j).values
            magnitude.append((lows - highs).pow(2) / 2)
        for code in range(4):
            in_bin = codes == code
            if bool(in_bin.any()):
                bins.append((int(in_bin.sum()), float(v[in_bin].abs().mean())))
    flips = _affordable(support, budget**2)
    # A support flip moves two coordinates by one level each and may move the median past one
    # more; a sign or magnitude change moves a coordinate from one level to another.
    level += budget  # no level exceeds the largest |b|
    recoded = flips + _affordable(sign, budget**2) + 2 * _affordable(magnitude, budget**2)
    changed = 2 * flips + recoded
    drift = slop = 0.0  # bins whose members changed: each change moves a mean <= 2 level / count
    for count, mean_abs in bins:
        shift = 2 * level if count <= changed else changed * 2 * level / (count - changed)
        drift += count * shift**2
        slop += count * ((count + 1) * _U * (mean_abs + budget)) ** 2
    moved = math.sqrt(2 * flips * level**2 + recoded * (2 * level) ** 2)
    return moved + budget + math.sqrt(drift) + math.sqrt(slop)


def _flips(sparse, layout, a: torch.Tensor, sel) -> tuple[int, int]:
    """How many of the payload's kept values this reader's own encoding of ``a`` does not keep
    (support flips), and how many it keeps at another 2-bit code (code flips)."""
    ours = sparse.select(a.detach().float())
    positions = layout.flat_positions(ours[0], layout.kept(sparse.topk)[0])
    codes = torch.full((a.numel(),), -1, dtype=torch.int64)
    codes[positions] = quantize_2bit(ours[1])[1]
    at = codes[sel.positions]
    return int((at < 0).sum()), int(((at >= 0) & (at != sel.codes)).sum())


def agreement(
    compressor: Compressor,
    payload: Payload,
    reference: Mapping[str, torch.Tensor],
    rtol: float,
) -> Agreement:
    """Could ``payload`` be ``compressor``'s encoding of an input within ``rtol * ||a||`` (L2) of
    ``reference`` (``a``, the codec input: pseudo-gradient plus error feedback)? Pure: no I/O,
    no state. An invalid payload is ``ok=False`` with the PayloadError's reason."""
    sparse = sparse_codec(compressor)
    shapes = {name: tuple(t.shape) for name, t in reference.items()}
    norm = math.sqrt(sum(float(t.double().pow(2).sum()) for t in reference.values()))
    budget = rtol * norm
    try:
        chosen = selections(compressor, payload, shapes)
    except PayloadError as error:
        return Agreement(False, error.reason, math.inf, budget, {}, 0, 0, math.inf, math.inf)
    totals = dict.fromkeys(_FAMILIES, 0.0)
    support_flips = code_flips = 0
    gap_sq = 0.0
    own = compressor.decode(compressor.encode(reference), shapes)
    theirs = compressor.decode(payload, shapes)
    for name, a in reference.items():
        flat = a.detach().double().reshape(-1)
        sel = chosen[name]
        layout = sparse.layout(shapes[name])
        kept = torch.zeros(flat.numel(), dtype=torch.bool)
        kept[sel.positions] = True
        for (mag, k), (mask, _) in zip(
            _chunks(layout, flat.abs(), sparse.topk),
            _chunks(layout, kept, sparse.topk),
            strict=True,
        ):
            totals["support"] += _support_cost(mag, mask, k)
        for family, cost in zip(_FAMILIES[1:], _code_costs(flat[sel.positions], sel), strict=True):
            totals[family] += cost
        support, codes = _flips(sparse, layout, a, sel)
        support_flips, code_flips = support_flips + support, code_flips + codes
        gap_sq += float((theirs[name].double() - own[name].double()).pow(2).sum())
    costs = {family: math.sqrt(total) for family, total in totals.items()}
    distance = max(costs.values())
    allowance = _allowance(sparse, reference, budget)
    decoded_gap = math.sqrt(gap_sq)
    reason = next((f for f in _FAMILIES if costs[f] > budget), None)
    if reason is None and decoded_gap > allowance:
        reason = "decoded"
    return Agreement(
        ok=reason is None,
        reason=reason,
        distance=distance,
        budget=budget,
        costs=costs,
        support_flips=support_flips,
        code_flips=code_flips,
        decoded_gap=decoded_gap,
        allowance=allowance,
    )
