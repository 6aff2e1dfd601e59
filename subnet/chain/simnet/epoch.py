"""A Yuma-style epoch: turn validators' weights into consensus, incentive and dividends.

This follows the shape of Yuma Consensus (opentensor/subtensor ``epoch.rs``) closely enough that
the metagraph shows who earns, without its bond EMA and liquid-alpha details:

1. Only permitted validators' rows count; each row is normalised to sum 1, stake ``S`` to sum 1.
2. Consensus ``c_j`` is the stake-weighted ``kappa``-quantile (the median at kappa = 0.5) of
   the weights that validators give miner ``j``: the largest weight that validators holding at
   least ``kappa`` of the stake give or exceed.
3. Weights are clipped to consensus, ``W'_ij = min(W_ij, c_j)``, so one validator cannot pay a
   miner above what the majority agrees on.
4. Rank ``R_j = sum_i S_i W'_ij``; incentive is rank normalised; trust is ``R_j`` over the
   unclipped support ``sum_i S_i W_ij``.
5. Bonds ``B_ij = S_i W'_ij`` normalised per miner; dividends ``D_i = sum_j B_ij I_j``,
   normalised. Emission splits half to miners by incentive, half to validators by dividends.

Pure functions over floats: the server converts to and from the chain's u16 fixed point.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpochResult:
    """Per-uid outputs of one epoch, each a list indexed by uid (floats in 0..1, emission rao)."""

    rank: list[float]
    trust: list[float]
    consensus: list[float]
    incentive: list[float]
    dividends: list[float]
    emission: list[int]


def validator_permits(stakes: list[int], max_validators: int) -> list[bool]:
    """The ``max_validators`` uids with the most stake (and some stake at all) get a permit."""
    order = sorted(range(len(stakes)), key=lambda uid: (-stakes[uid], uid))
    top = {uid for uid in order[:max_validators] if stakes[uid] > 0}
    return [uid in top for uid in range(len(stakes))]


def _normalise(values: list[float]) -> list[float]:
    total = sum(values)
    return [v / total for v in values] if total > 0 else [0.0] * len(values)


def _weighted_quantile(column: list[tuple[float, float]], kappa: float) -> float:
    """Largest weight ``w`` such that validators giving ``>= w`` hold ``>= kappa`` of stake."""
    support = 0.0
    for weight, stake in sorted(column, key=lambda ws: -ws[0]):
        support += stake
        if support >= kappa - 1e-12:
            return weight
    return 0.0


def run_epoch(
    stakes: list[int],
    permits: list[bool],
    weights: dict[int, dict[int, float]],
    *,
    kappa: float = 0.5,
    emission: int = 0,
) -> EpochResult:
    """One epoch over ``n = len(stakes)`` uids.

    ``weights[i][j]`` is validator ``i``'s raw weight for uid ``j`` (any non-negative scale);
    rows of uids without a permit are ignored. ``emission`` (rao) is split between miners and
    validators.
    """
    n = len(stakes)
    validators = [i for i in range(n) if permits[i] and sum(weights.get(i, {}).values()) > 0]
    stake = _normalise([float(stakes[i]) if i in validators else 0.0 for i in range(n)])
    rows = {i: _normalise([weights[i].get(j, 0.0) for j in range(n)]) for i in validators}

    consensus = [
        _weighted_quantile([(rows[i][j], stake[i]) for i in validators], kappa) for j in range(n)
    ]
    clipped = {i: [min(rows[i][j], consensus[j]) for j in range(n)] for i in validators}
    rank = [sum(stake[i] * clipped[i][j] for i in validators) for j in range(n)]
    support = [sum(stake[i] * rows[i][j] for i in validators) for j in range(n)]
    trust = [rank[j] / support[j] if support[j] > 0 else 0.0 for j in range(n)]
    incentive = _normalise(rank)

    bonds_total = [sum(stake[i] * clipped[i][j] for i in validators) for j in range(n)]
    dividends = _normalise(
        [
            sum(
                stake[i] * clipped[i][j] / bonds_total[j] * incentive[j]
                for j in range(n)
                if bonds_total[j] > 0
            )
            if i in validators
            else 0.0
            for i in range(n)
        ]
    )
    half = emission // 2
    paid = [int(half * incentive[u]) + int((emission - half) * dividends[u]) for u in range(n)]
    return EpochResult(rank, trust, consensus, incentive, dividends, paid)
