"""What the broadcast costs in loss: SparseLoCo trained with each way of publishing versions.

``bench.py broadcast --loss`` trains SparseLoCo exactly as ``bench.py convergence`` runs it (the
protocol's defaults: codec, error feedback, a fresh warm-started inner AdamW every round,
aggregation, outer step; the same token streams and R simulated workers), once per way of
publishing each version: ``exact`` applies the merged step as is (what the lossless patch
publishes), ``default`` as the protocol publishes it (``broadcast`` and ``broadcast_budget``),
and one run per extra ``--budget`` b re-sparsified to b times the upload's top-k with the
holder's error feedback (``subnet.versions.delta.Resparsifier``); the next round starts from what
was published. For each: the held-out loss on every seed and their mean, its ratio to
``exact``, and the bytes each peer uploads and downloads per round (signed envelopes).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from benchmarks import convergence
from benchmarks.common import environment, setup
from benchmarks.tuning import Setting
from subnet.versions.delta import SCOPES

PROTOCOL = convergence.PROTOCOL


@dataclass(frozen=True)
class Way:
    """One sparse broadcast: ``budget`` uploads' top-k, chosen per ``scope``, holder's ``decay``."""

    budget: float
    scope: str = "chunk"
    decay: float = 1.0

    @classmethod
    def parse(cls, spec: str) -> Way:
        """``B[:model][:dD]``: ``4``, ``1.25:model``, ``1:model:d0.5`` (decay 0.5)."""
        budget, *rest = spec.strip().split(":")
        scope, decay = "chunk", 1.0
        for part in rest:
            if part in SCOPES:
                scope = part
            elif part.startswith("d"):
                decay = float(part[1:])
            else:
                raise ValueError(f"--budget {spec!r}: {part!r} is neither a scope nor dDECAY")
        return cls(float(budget), scope, decay)

    def describe(self) -> str:
        """``sparse x1 model decay 0.5``: how the record says what ran."""
        scope = "" if self.scope == "chunk" else f" {self.scope}"
        decay = "" if self.decay == 1.0 else f" decay {self.decay:g}"
        return f"sparse x{self.budget:g}{scope}{decay}"

    def lane(self) -> str:
        """The record's key: ``sparse_x4``, ``sparse_x1.25_model``, ``sparse_x1_d0.5``."""
        return self.describe().replace(" decay ", "_d").replace(" ", "_")


def budgets(args: argparse.Namespace) -> list[Way]:
    """The ``--budget`` list: multiples of the upload's top-k, each with its scope and decay."""
    return [Way.parse(b) for b in str(getattr(args, "budget", "") or "").split(",") if b.strip()]


def _lane(bench: convergence._Bench, seeds: list[int], broadcast: str, way: Way) -> dict:
    args = bench.args
    args.broadcast = broadcast
    args.broadcast_budget, args.broadcast_scope, args.broadcast_decay = (
        way.budget,
        way.scope,
        way.decay,
    )
    outer = convergence.method_of("sparseloco", args).outer
    setting = Setting(args.lr, outer, args.moment_init)
    runs = {seed: bench.trial("sparseloco", setting, seed) for seed in seeds}
    held = [r["heldout_loss"] for r in runs.values()]
    up = sum(r["bytes_up_per_worker"] for r in runs.values()) / len(runs) / args.rounds
    down = sum(r["bytes_down_per_worker"] for r in runs.values()) / len(runs) / args.rounds
    return {
        "broadcast": "patch" if broadcast == "patch" else way.describe(),
        "heldout_loss_by_seed": {str(s): r["heldout_loss"] for s, r in runs.items()},
        "heldout_loss_mean": round(sum(held) / len(held), 4),
        "upload_bytes_per_worker_per_round": round(up),
        "download_bytes_per_peer_per_round": round(down),
        "download_over_upload": round(down / up, 3),
    }


def run_loss(args: argparse.Namespace) -> dict:
    """Train SparseLoCo once per way of publishing; return the JSON record."""
    setup(args.threads)
    args.methods = "sparseloco"
    bench = convergence._Bench(args)
    seeds = [int(s) for s in args.seeds.split(",")]
    default = Way(PROTOCOL.broadcast_budget)
    lanes = {"exact": _lane(bench, seeds, "patch", default)}
    lanes["default"] = _lane(bench, seeds, PROTOCOL.broadcast, default)
    for way in budgets(args):
        lanes[way.lane()] = _lane(bench, seeds, "sparse", way)
    exact = lanes["exact"]["heldout_loss_mean"]
    for lane in lanes.values():
        lane["loss_over_exact"] = round(lane["heldout_loss_mean"] / exact, 4)
    default = lanes["default"]
    return {
        "benchmark": "broadcast-loss",
        "defaults": "the protocol's (SparseLoCo as shipped; broadcast "
        f"{PROTOCOL.broadcast}, budget {PROTOCOL.broadcast_budget})",
        "preset": args.preset,
        "dataset": args.data.name,
        "workers": args.workers,
        "inner_steps": args.inner_steps,
        "rounds": args.rounds,
        "seeds": seeds,
        "upload_support": args.upload_support,
        **lanes,
        "target": "default broadcast: download <= 1x upload and loss <= 1.005x exact",
        "target_met": default["download_over_upload"] <= 1 and default["loss_over_exact"] <= 1.005,
        "env": environment(args.device),
    }
