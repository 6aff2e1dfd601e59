"""Bytes each peer downloads per round for the new model version, against what it uploads.

Holders publish the same rounds of ``hypertrain-20m`` through the real ``VersionPublisher``:
``default`` as the protocol publishes (``ProtocolConfig.broadcast`` and ``broadcast_budget``: the
re-sparsified merged step for the sparse codecs, ``subnet.versions.delta``), ``patch`` as lossless
XOR patches of the fp32 weights (``--protocol.broadcast patch``), and one per extra ``--budget``.
A follower peer of each syncs every round through ``ModelSync`` over a ``CountingStore``: the
figures are the bodies of the objects it GETs (the latest pointer, the delta or patch, and any
manifest it reads), signed envelopes as they cross the network. Every round each follower's
weights digest must equal its holder's, bit for bit.

Each round merges ``--uploads`` synthetic signed uploads (a shared direction plus independent
noise per miner, as ``bench.py scale`` makes them; their supports overlap partly), with the
protocol's aggregation and outer step. The upload is the mean signed envelope a miner PUTs.
A validator additionally downloads every upload it scores; that is reported apart.

Whether a peer's download stays flat as merges grow: the same rounds are published again for
every R of ``--uploads-list`` (default 4, 16 and 64 merged uploads), and the ``default`` block's
``by_uploads`` gives, per R, the upload, the default broadcast's download over it (and the
lossless patch's, which grows with the merged support). With ``--loss-uploads`` (e.g. ``4,16``)
the loss bench below also runs once per R listed with R workers, and ``by_uploads`` adds its
``loss_over_exact``: the default broadcast's held-out loss over the lossless patch's. The target
(issue 45): the default download at most 3x an upload at every R, at most 0.5 % loss cost.

``--loss`` instead trains SparseLoCo on a small model once per broadcast and reports the held-out
loss of each (``benchmarks.broadcast_loss``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from bittensor.sp_core import Keypair

from benchmarks import convergence
from benchmarks.broadcast_loss import Way, budgets, run_loss
from benchmarks.common import environment, setup
from subnet.compression import CompressionConfig, build_compressor, state_digest
from subnet.config import ProtocolConfig
from subnet.model import build_model
from subnet.storage import MemoryStore
from subnet.storage.counting import ByteMeter, CountingStore
from subnet.storage.keys import ObjectKind
from subnet.training import build_outer_optimizer, snapshot
from subnet.training.streaming import merge_payloads
from subnet.versions import ModelSync, VersionPublisher
from subnet.versions.delta import Resparsifier, uses_sparse_broadcast
from subnet.wire import encode_envelope

PROTOCOL = ProtocolConfig()
RUN = "beam-bench"
HOLDER = Keypair.create_from_seed(bytes(range(32)))
MINER = Keypair.create_from_seed(bytes(range(1, 33)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py broadcast``."""
    parser.add_argument("--preset", default=None, help="hypertrain-20m (bytes), tiny (--loss)")
    parser.add_argument("--uploads", type=int, default=16, help="uploads merged per round")
    parser.add_argument(
        "--uploads-list",
        default="4,16,64",
        help="R values (uploads merged per round) whose default-broadcast bytes the default "
        "block reports under by_uploads; --uploads is counted in any case",
    )
    parser.add_argument(
        "--loss-uploads",
        default="",
        help="R values at which to also train (as --loss, R workers) and put the default "
        "broadcast's loss over the lossless patch's in by_uploads; empty: none",
    )
    parser.add_argument("--rounds", type=int, default=None, help="versions after v0 (3; --loss 10)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=PROTOCOL.checkpoint_every,
        help="K (protocol default)",
    )
    parser.add_argument(
        "--budget",
        default="",
        help="sparse broadcast budgets to compare with the protocol's default, comma-separated "
        "multiples of the upload's top-k (--protocol.broadcast_budget)",
    )
    loss = parser.add_argument_group("--loss: held-out loss of SparseLoCo for each broadcast")
    loss.add_argument("--loss", action="store_true", help="train instead of counting bytes")
    loss.add_argument(
        "--data", type=Path, default=convergence.DEFAULT_DATA, help="dataset (built if missing)"
    )
    loss.add_argument("--workers", type=int, default=4, help="R simulated workers")
    loss.add_argument("--inner-steps", type=int, default=PROTOCOL.inner.steps, help="H")
    loss.add_argument("--seeds", default="0,1,2", help="model init and data order seeds")
    loss.add_argument("--eval-batches", type=int, default=16, help="held-out batches")
    loss.add_argument(
        "--upload-support",
        choices=("own", "leader"),
        default="own",
        help="own top-k per worker (SparseLoCo), or the round's leader's (ScaleCom; measurement)",
    )


def _loss_args(args: argparse.Namespace) -> argparse.Namespace:
    """The convergence benchmark's defaults, with this command's flags on top."""
    parser = argparse.ArgumentParser()
    convergence.add_arguments(parser)
    out = parser.parse_args([])
    for key in (
        "data",
        "workers",
        "inner_steps",
        "seeds",
        "eval_batches",
        "budget",
        "upload_support",
        "device",
        "threads",
    ):
        setattr(out, key, getattr(args, key))
    out.preset, out.rounds = args.preset or "tiny", args.rounds or out.rounds
    return out


def _uploads(model: torch.nn.Module, count: int, round_: int, cfg: CompressionConfig) -> list:
    """``count`` signed synthetic uploads of one round: ``(envelope bytes, payload)`` each."""
    compressor = build_compressor(cfg)
    gen = torch.Generator().manual_seed(1000 * round_)
    shared = {k: torch.randn(v.shape, generator=gen) * 1e-3 for k, v in model.named_parameters()}
    out = []
    for i in range(count):
        noise = torch.Generator().manual_seed(1000 * round_ + 1 + i)
        grad = {k: v + torch.randn(v.shape, generator=noise) * 1e-3 for k, v in shared.items()}
        payload = compressor.encode(grad)
        blob = encode_envelope(signer=MINER, run=RUN, kind=ObjectKind.GRADIENT, window=round_,
                               tensors=payload, base_version=round_)  # fmt: skip
        out.append((len(blob), payload))
    return out


class _Lane:
    """One holder publishing one way (patches for ``way`` None, else sparse deltas that way),
    and a follower peer counting what it downloads."""

    def __init__(self, way: Way | None, every: int, cfg: CompressionConfig) -> None:
        self.meter = ByteMeter()
        inner = MemoryStore()
        self.publisher = VersionPublisher(inner, HOLDER, RUN, checkpoint_every=every)
        self.peer = ModelSync(CountingStore(inner, self.meter), HOLDER.ss58_address, RUN,
                              max_bytes=1 << 30)  # fmt: skip
        self.way = way
        self.spars = Resparsifier(cfg, way.budget, way.scope, way.decay) if way else None
        self.state: dict | None = None
        self.version: int | None = None
        self.rows: list[dict] = []

    def publish(self, base: dict, target: dict, window: int) -> dict:
        """Publish ``target`` (re-sparsified from ``base`` when sparse); return the new state."""
        delta = None
        if self.spars is not None:
            target, delta = self.spars.reduce(base, target)
        self.publisher.publish(target, window, delta)
        return target

    def follow(self) -> None:
        """The peer syncs; record its bytes and time, and check its digest is the holder's."""
        self.meter.take()
        start = time.perf_counter()
        self.state, manifest = self.peer.sync(self.state, self.version)
        seconds = time.perf_counter() - start
        self.version = manifest.version
        exact = state_digest(self.state) == state_digest(self.publisher.latest_state)
        self.rows.append({"version": manifest.version, "path": self.peer.last_path,
                          "bytes_down": self.meter.take()["bytes_down"],
                          "sync_seconds": round(seconds, 2), "bit_exact": exact})  # fmt: skip


def _count(args: argparse.Namespace, uploads: int) -> tuple[dict[str, _Lane], int]:
    """Publish ``args.rounds`` versions of ``uploads`` merged uploads each way; the lanes and
    the mean upload envelope."""
    p = PROTOCOL
    cfg = p.compression
    compressor = build_compressor(cfg)
    model = build_model(args.preset, seed=0)
    params = snapshot(model)
    shapes = {k: tuple(v.shape) for k, v in params.items()}
    default = Way(p.broadcast_budget) if uses_sparse_broadcast(p.broadcast, cfg) else None
    lanes = {"default": _Lane(default, args.checkpoint_every, cfg)}
    lanes["patch"] = _Lane(None, args.checkpoint_every, cfg)
    lanes |= {way.lane(): _Lane(way, args.checkpoint_every, cfg) for way in budgets(args)}
    states = {name: dict(params) for name in lanes}
    outers = {name: build_outer_optimizer(p.outer) for name in lanes}
    for lane in lanes.values():
        lane.publisher.publish(params, -1)
        lane.follow()  # a joiner: checkpoint 0
    ups = []
    for r in range(args.rounds):
        batch = _uploads(model, uploads, r, cfg)
        ups += [n for n, _ in batch]
        merged = merge_payloads(
            compressor, [pl for _, pl in batch], shapes, [1.0] * len(batch), p.aggregation
        )
        for name, lane in lanes.items():
            base = states[name]
            target = {k: v.clone() for k, v in base.items()}
            outers[name].step(target, merged)
            states[name] = lane.publish(base, target, r)
            lane.follow()
    return lanes, round(sum(ups) / len(ups))


def _down(lane: _Lane) -> int:
    rounds = lane.rows[1:]  # after joining
    return round(sum(row["bytes_down"] for row in rounds) / len(rounds))


def _ints(spec: str) -> list[int]:
    return [int(x) for x in str(spec or "").split(",") if x.strip()]


def run(args: argparse.Namespace) -> dict:
    """Publish ``--rounds`` versions each way (or, with ``--loss``, train); the JSON record.

    ``default`` is the protocol's broadcast (``ProtocolConfig.broadcast``, ``broadcast_budget``);
    ``patch`` the lossless one; ``sparse_xB`` each extra ``--budget`` B. The default block's
    ``by_uploads`` has, for each R of ``--uploads-list``, the download over the upload (and
    with ``--loss-uploads``, at those R, the loss over the lossless patch's).
    """
    if args.loss:
        return run_loss(_loss_args(args))
    loss_base = _loss_args(args) if _ints(args.loss_uploads) else None
    args.preset, args.rounds = args.preset or "hypertrain-20m", args.rounds or 3
    setup(args.threads)
    p = PROTOCOL
    cfg = p.compression
    counted = {r: _count(args, r) for r in sorted({args.uploads, *_ints(args.uploads_list)})}
    lanes, upload = counted[args.uploads]
    record = {"benchmark": "broadcast", "preset": args.preset,
              "defaults": f"the protocol's: codec {cfg.name}, broadcast {p.broadcast}, budget "
                          f"{p.broadcast_budget}, outer {p.outer.name} lr {p.outer.lr}",
              "params": sum(p.numel() for p in build_model(args.preset).parameters()),
              "uploads_per_round": args.uploads,
              "rounds": args.rounds, "checkpoint_every": args.checkpoint_every,
              "upload_bytes_per_miner_per_round": upload}  # fmt: skip
    for name, lane in lanes.items():
        down = _down(lane)
        record[name] = {
            "broadcast": lane.way.describe() if lane.way else "patch",
            "download_bytes_per_peer_per_round": down,
            "download_over_upload": round(down / upload, 3),
            "joiner_checkpoint_bytes": lane.rows[0]["bytes_down"],
            "all_bit_exact": all(row["bit_exact"] for row in lane.rows),
            "rounds": lane.rows[1:],
        }
    by_uploads = {}
    for r, (r_lanes, r_up) in counted.items():
        default, patch = _down(r_lanes["default"]), _down(r_lanes["patch"])
        by_uploads[str(r)] = {
            "upload_bytes_per_miner_per_round": r_up,
            "download_bytes_per_peer_per_round": default,
            "download_over_upload": round(default / r_up, 3),
            "patch_download_over_upload": round(patch / r_up, 3),
            "all_bit_exact": all(row["bit_exact"] for row in r_lanes["default"].rows),
        }
    for r in _ints(args.loss_uploads):
        assert loss_base is not None
        loss = run_loss(argparse.Namespace(**{**vars(loss_base), "workers": r}))
        row = by_uploads.setdefault(str(r), {})
        row["loss_over_exact"] = loss["default"]["loss_over_exact"]
        row["loss"] = {
            k: loss[k] for k in ("preset", "dataset", "workers", "inner_steps", "rounds", "seeds")
        }
        row["loss"]["heldout_loss_mean"] = {
            lane: loss[lane]["heldout_loss_mean"] for lane in ("exact", "default")
        }
        row["loss"]["trained_download_over_upload"] = loss["default"]["download_over_upload"]
    record["default"]["by_uploads"] = by_uploads
    record["validator_download_per_round"] = {
        name: args.uploads * upload + record[name]["download_bytes_per_peer_per_round"]
        for name in lanes
    }
    record["target"] = (
        "default: download <= 3x upload at every R measured, loss <= 1.005x the lossless patch's"
    )
    record["target_met"] = (
        all(
            row.get("download_over_upload", 0) <= 3 and row.get("loss_over_exact", 1) <= 1.005
            for row in by_uploads.values()
        )
        and record["default"]["download_over_upload"] <= 3
    )
    record["env"] = environment(args.device)
    return record
