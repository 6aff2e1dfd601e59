"""The one runtime builder: a node's bucket, state folder and metrics around its mode's seams.

A mode is the seams it brings, never a flag: subnet mode (``subnet.node.build``) a block clock,
the chain's membership, chain weights and the subnet's plan; a room (``subnet.room.node``) a
time clock, the room's membership, no weights and the run's pinned plan. Each opens those and
hands them here as :class:`Seams`; everything else a neuron talks to is built once, the same way
for both: the bucket (the same checks, the same errors), the state folder, the metrics file and
its W&B mirror. What a clock can do beyond ticking (a beacon, ticks that are time) is declared
on the seams by whoever built the clock, so no code asks a clock what it happens to have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import Clock
from ..config import BeamConfig
from ..errors import SetupError
from ..membership import Membership
from ..monitor import MetricsSink
from ..monitor.metrics import Mirror
from ..preflight import bucket_hint
from ..storage.base import StorageError
from ..storage.config import StorageConfig, require_bucket
from ..storage.counting import ByteMeter, CountingStore
from ..storage.s3 import S3Store
from ..topology import RunPlan
from ..weights import WeightSink
from ..wire import Signer
from .runtime import Beacon, Runtime


@dataclass(frozen=True)
class Seams:
    """What decides a neuron's mode, built by that mode."""

    clock: Clock
    membership: Membership
    weights: WeightSink
    plan: RunPlan
    beacon: Beacon | None = None  # a value nobody knew before the tick (a drand pulse)
    tick_seconds: float | None = None  # nominal seconds of a tick, when ticks are time
    labels: Mapping[str, str | int] = field(default_factory=dict)  # where it runs (W&B config)


def open_bucket(storage: StorageConfig | None, meter: ByteMeter) -> CountingStore:
    """This node's bucket, checked readable and write-once, its bytes counted on ``meter``;
    ``SetupError`` (with what to do) when it does not answer as it must."""
    settings = require_bucket(storage)
    store = CountingStore(S3Store.from_config(settings), meter)
    try:
        store.check()
        store.check_write_once()
    except StorageError as error:
        hint = bucket_hint(settings, error.reason)
        raise SetupError(f"this node's bucket is not usable: {error}; {hint}") from None
    return store


def make_runtime(
    cfg: BeamConfig, role: str, signer: Signer, store: CountingStore, seams: Seams
) -> Runtime:
    """The runtime of a neuron of ``role`` signing as ``signer`` with its bucket ``store``
    (from :func:`open_bucket`) and its mode's ``seams``."""
    hotkey = signer.ss58_address
    state_dir = Path(cfg.node.neuron.state_dir).expanduser() / f"{role}-{hotkey[:8]}"
    metrics = MetricsSink(
        state_dir / "metrics.jsonl",
        mirrors=mirrors(cfg, role, state_dir, seams),
        role=role,
        hotkey=hotkey,
        config_hash=cfg.protocol.config_hash(),
        plan=seams.plan.digest,
    )
    return Runtime(
        cfg=cfg,
        role=role,
        signer=signer,
        store=store,
        membership=seams.membership,
        clock=seams.clock,
        plan=seams.plan,
        metrics=metrics,
        state_dir=state_dir,
        weights=seams.weights,
        meter=store.meter,
        beacon=seams.beacon,
        tick_seconds=seams.tick_seconds,
    )


def mirrors(cfg: BeamConfig, role: str, state_dir: Path, seams: Seams) -> list[Mirror]:
    """W&B when enabled; it logs the protocol config, its hash, the plan and where it runs."""
    w = cfg.node.wandb
    if w.mode == "disabled":
        return []
    from ..monitor.wandb_sink import WandbSink

    config = {
        "protocol": cfg.protocol.model_dump(mode="json"),
        "config_hash": cfg.protocol.config_hash(),
        "role": role,
        **seams.labels,
        "topology": seams.plan.ref,
        "plan": seams.plan.digest,
    }
    name = f"{role}-{cfg.node.wallet.name}-{cfg.node.wallet.hotkey}"
    folder = Path(w.dir).expanduser() if w.dir else state_dir
    sink = WandbSink(
        mode=w.mode,
        project=w.project,
        name=name,
        group=cfg.protocol.run,
        folder=folder,
        config=config,
    )
    return [sink]
