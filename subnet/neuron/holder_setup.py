"""What a holder builds at setup: the dataset in its bucket, and its own model line.

The line's model is the seeded initial model; its outer optimizer is the plan's ``[outer]`` rule;
its versions go in the key space of the model lane the slot writes (else the one it reads); the
sparse broadcast's error feedback and the persistence guard are built where the protocol and the
aggregation ask for them.
"""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from ..config import ConfigError
from ..data import MANIFEST_KEY, TokenDataset
from ..model import build_model
from ..storage.base import ObjectNotFound
from ..storage.keys import ObjectKind
from ..topology import SlotPlan
from ..training import build_outer_optimizer
from ..training.config import AggregationConfig
from ..training.guard import PersistenceGuard
from ..versions import VersionPublisher
from ..versions.delta import Resparsifier, uses_sparse_broadcast
from .model_line import ModelLine
from .replica import checkpoint_bytes
from .rules import OUTER_RULES
from .runtime import Runtime


def publish_dataset(rt: Runtime) -> None:
    """Copy the prepared dataset from ``--data.dir`` to this bucket (at the plan's data
    prefix) unless it is there."""
    prefix = rt.data_prefix()
    try:
        rt.store.head(prefix + MANIFEST_KEY)
        return
    except ObjectNotFound:
        pass
    folder = Path(rt.cfg.node.data.dir).expanduser() / rt.cfg.protocol.dataset
    if not (folder / MANIFEST_KEY).exists():
        raise ConfigError(
            f"dataset {rt.cfg.protocol.dataset} not found in {folder}; build it with "
            f"`python scripts/prepare_data.py --out {folder}` or set --data.dir"
        )
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:  # shards first, manifest last: readers never see a partial dataset
        if path.name != MANIFEST_KEY:
            rt.store.put(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    rt.store.put(prefix + MANIFEST_KEY, (folder / MANIFEST_KEY).read_bytes())
    logger.info("published dataset {} ({} files) to {}", folder.name, len(files), rt.store.location)


def model_lane(rt: Runtime, slot: SlotPlan) -> str | None:
    """The lane whose key space the slot's versions go in: the model lane it writes, else the
    one it reads."""
    written = [
        s.lane
        for s in slot.steps
        if s.lane and rt.plan.lanes[s.lane].kind == ObjectKind.MODEL_MANIFEST.value
    ]
    return written[0] if written else rt.lane_read(slot, ObjectKind.MODEL_MANIFEST.value)


def own_line(
    rt: Runtime, slot: SlotPlan, data: TokenDataset, aggregation: AggregationConfig
) -> ModelLine:
    """The holder's own model line, at the seeded initial model (nothing published yet)."""
    p, plan = rt.cfg.protocol, rt.plan
    model = build_model(p.model, vocab_size=data.vocab_size, seed=p.seed)
    outer = build_outer_optimizer(OUTER_RULES[plan.outer["name"]](p, plan.outer))
    lane = model_lane(rt, slot)
    try:  # the sparse broadcast's error feedback, or None for lossless patches
        sparse = uses_sparse_broadcast(p.broadcast, p.compression)
    except ValueError as exc:
        raise ConfigError(f"--protocol.broadcast: {exc}") from None
    broadcast = Resparsifier(p.compression, p.broadcast_budget) if sparse else None
    publisher = VersionPublisher(
        rt.store,
        rt.signer,
        p.run,
        checkpoint_every=p.checkpoint_every,
        max_bytes=max(rt.max_bytes, checkpoint_bytes(model)),
        lane=lane,
    )
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    guard = PersistenceGuard(shapes, p.compression.chunk) if aggregation.guard else None
    return ModelLine(model, outer, publisher, lane, broadcast=broadcast, guard=guard)
