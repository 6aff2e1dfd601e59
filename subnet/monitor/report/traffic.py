"""Bytes per peer per round, by role, against DDP as a ring all-reduce (pure, no I/O).

Every neuron's meter counts what crosses the network through object storage (bodies and header
lines, both ways; ``subnet.storage.counting``) and each metrics record carries what was moved
since the previous one: a miner's ``train`` record covers its window (model sync, data shards,
upload), a validator's ``scores`` record its window (uploads fetched, the previous window's
report), the holder's ``version`` record its round (uploads and reports read, the version
published). A role's *per round* figure is the mean over those records. A peer's first record
carries one-off transfers (the dataset shards and the first full checkpoint a miner or validator
downloads; the dataset and the initial model the holder uploads), so the *steady* figures leave
each peer's first record out.

DDP's figure is per worker per round and each way: ``2 (n - 1) / n`` fp32 model sizes per inner
step, over the round's contributors ``n`` and the protocol's inner steps (the holder logs it as
``ddp_ring_bytes_per_worker``); a worker sends that much and receives as much.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .load import Run
from .units import fmt_bytes

ROLES = ("miner", "validator", "holder")


@dataclass(frozen=True)
class RoleTraffic:
    """What the peers of one role moved: totals, and the mean per peer per round."""

    role: str
    peers: int  # peers of this role with at least one record
    records: int  # peer-rounds counted
    up: int  # bytes sent, all records
    down: int  # bytes received, all records
    first_up: int = 0  # of which in each peer's first record
    first_down: int = 0

    @property
    def up_per_round(self) -> float:
        """Mean bytes sent by one peer in one round."""
        return self.up / self.records if self.records else 0.0

    @property
    def down_per_round(self) -> float:
        """Mean bytes received by one peer in one round."""
        return self.down / self.records if self.records else 0.0

    @property
    def both_per_round(self) -> float:
        """Up plus down, per peer per round."""
        return self.up_per_round + self.down_per_round

    @property
    def steady_rounds(self) -> int:
        """Peer-rounds after each peer's first."""
        return self.records - self.peers

    @property
    def steady_up(self) -> float | None:
        """Mean bytes sent by one peer in a round after its first (None with none)."""
        return (self.up - self.first_up) / self.steady_rounds if self.steady_rounds else None

    @property
    def steady_down(self) -> float | None:
        """Mean bytes received by one peer in a round after its first (None with none)."""
        return (self.down - self.first_down) / self.steady_rounds if self.steady_rounds else None


def by_role(run: Run) -> list[RoleTraffic]:
    """Miners, validators, holder (those that logged bytes), in that order."""
    out = []
    for role in ROLES:
        mine = [t for t in run.transfers if t.role == role]
        if not mine:
            continue
        first: dict[str, tuple[int, int]] = {}
        for t in mine:  # transfers are in file order: a peer's first record comes first
            first.setdefault(t.hotkey, (t.up, t.down))
        out.append(
            RoleTraffic(
                role,
                len(first),
                len(mine),
                sum(t.up for t in mine),
                sum(t.down for t in mine),
                sum(u for u, _ in first.values()),
                sum(d for _, d in first.values()),
            )
        )
    return out


def ddp_ring_per_round(run: Run) -> float | None:
    """DDP's bytes per worker per round, each way (mean over the merged rounds that logged it)."""
    rings = [v.ddp_ring for v in run.versions if v.version >= 1 and v.ddp_ring is not None]
    return sum(rings) / len(rings) if rings else None


def miner_saving(run: Run) -> float | None:
    """DDP ring (up + down per worker per round) over a miner's up + down per round (all of
    its rounds, the first included)."""
    ring = ddp_ring_per_round(run)
    miner = next((r for r in by_role(run) if r.role == "miner"), None)
    if not ring or miner is None or not miner.both_per_round:
        return None
    return 2 * ring / miner.both_per_round


def verification(run: Run) -> str | None:
    """What checks of training moved, for its own line: the answers miners wrote and the ones
    validators read, already inside the per-role figures (None when nothing was checked)."""
    sent, read = run.verification.get("miner"), run.verification.get("validator")
    if not sent and not read:
        return None
    parts = []
    if sent:
        parts.append(f"miners wrote {sent[1]} answer(s), {fmt_bytes(sent[0])} up")
    if read:
        parts.append(f"validators read {read[1]}, {fmt_bytes(read[0])} down")
    uploads = sum(t.up for t in run.transfers if t.role == "miner")
    share = (
        f" ({100 * sent[0] / uploads:.1f} % of the miners' bytes up)" if sent and uploads else ""
    )
    return "verification (checks of training): " + "; ".join(parts) + share


def describe(run: Run, fmt: Callable[[float], str]) -> str:
    """One line for the demo's summary; ``fmt`` formats a byte count."""
    parts, roles = [], by_role(run)
    for r in roles:
        part = f"{r.role} {fmt(r.up_per_round)} up / {fmt(r.down_per_round)} down"
        if r.steady_up is not None and r.steady_down is not None:
            part += f" ({fmt(r.steady_up)} / {fmt(r.steady_down)} after its first)"
        parts.append(part)
    line = "per peer per round: " + ", ".join(parts) if parts else "no bytes logged"
    ring, saved = ddp_ring_per_round(run), miner_saving(run)
    miner = next((r for r in roles if r.role == "miner"), None)
    if ring == 0:
        line += "; DDP: one worker per round, nothing to all-reduce"
    elif ring is not None:
        # The one bandwidth figure (the run page's headline too): per worker per round, up + down.
        line += (
            f"\na DDP worker (ring all-reduce of fp32 gradients every step) moves {fmt(2 * ring)} "
            "up + down a round"
        )
        if saved is not None and miner is not None:
            line += f", a miner {fmt(miner.both_per_round)}: {saved:,.0f}x less"
    checks = verification(run)
    return line + (f"\n{checks}" if checks else "")
