"""Every object Beam stores is named here, and only here.

Layout: `beam/v{version}/{run}/{lane}/{kind}/{window:012d}/{sender}` — protocol version first, so
peers on an incompatible version list and read disjoint key spaces and never parse each other's
objects. The lane is the named stream between slots of the run plan (`grads`, `scores`, `model`,
...), so two lanes carrying the same kind never collide; each kind has a default lane.
The window (or round, or shard index) is zero-padded so key order is numeric order. `latest_key`
names the one mutable pointer per (run, kind, sender), e.g. the newest model manifest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# Bump on any incompatible change to keys or the wire (2: lanes, 3: deltas, 4: commit-reveal and
# score reports that name the payload each score is for, 5: audits of training, 6: the plan
# digest in the signed header, every kind's metadata parsed by its schema, and checks of
# training: error-feedback roots in every gradient, kinds ``checks`` and ``check-answer``; 7: the
# checks draw from the chain's drand pulse, not the block hash, so a v6 validator and a v7 miner
# would read different chunks; 8: a gradient says the CPU threads it was trained with, and the
# replay that checks it uses as many, on the kernels ``subnet.kernels`` pins; 9: a multi-rank
# miner adds each micro-batch's averaged gradient to the step's earlier ones, and FSDP2's norms
# are taken over whole tensors, so DDP and FSDP2 miners replay bit for bit; 10: a gradient says at
# most 16 threads, the most a validator's replay of it runs on; 11: a validator verifies on
# its own replays only and splits its checks between its verified senders and its queue of
# newcomers, notices name only windows their validator could have checked, a key written twice
# is refused, and the holder caps each sender's share of a window and holds a persistent push
# on a chunk to the median's; 12: a gradient states its replay class and a check notice the
# classes its validator covers, and checks go only to validators that cover an upload's class).
PROTOCOL_VERSION = 12
ROOT = "beam"
_WINDOW_DIGITS = 12
_RUN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# A plan lane (the spec's identifiers), optionally with one `.sub` stream of that lane (a sweep
# point's model on the lane `model`: `model.p1`); no spec lane has a dot, so the two never clash.
LANE_PATTERN = r"^[a-z][a-z0-9_-]{0,47}(\.[a-z0-9-]{1,15})?$"
_LANE = re.compile(LANE_PATTERN)
_SENDER = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{40,60}$")  # base58 ss58 address


class ObjectKind(str, Enum):
    """What an object is; part of both its key and its signed header."""

    GRADIENT = "gradient"  # a miner's compressed pseudo-gradient for one window
    # A miner's signed commitment to its gradient's digest, written before the upload deadline
    # on a commit-reveal lane; the gradient itself (the reveal) may only be written after it.
    GRADIENT_COMMIT = "gradient-commit"
    SCORES = "scores"  # a validator's score report for one window
    MODEL_PATCH = "model-patch"  # model version v+1 as a lossless patch against v
    MODEL_DELTA = "model-delta"  # model version v+1 as v minus a sparse compressed update
    CHECKPOINT = "checkpoint"  # a full model version
    MODEL_MANIFEST = "model-manifest"  # names the latest model version and its hash
    ROOM_MANIFEST = "room-manifest"  # a room's signed roster
    DATASET_SHARD = "dataset-shard"  # token ids of one shard; window = shard index
    DATASET_MANIFEST = "dataset-manifest"  # shard list with a sha256 per shard
    WEIGHTS = "weights"  # a scorer's normalized weights for a consensus slot, one window
    DATA_GRANT = "data-grant"  # a lead's grant of data units to a member, one round
    RUN_FINAL = "run-final"  # the deciding slot's signed word that the run stops after a window
    # A validator's check notice for one window: whose uploads it checks, and how its last
    # checks came out (subnet.wire.schema.CheckNotice)
    CHECKS = "checks"
    # A miner's answer to a check of its upload of one window: drawn chunks of its error feedback
    # before and after, proven against the roots the upload committed to (subnet.verify.answer)
    CHECK_ANSWER = "check-answer"


# The lane an object travels on when the caller names none (the scored subnet's lanes).
DEFAULT_LANES: dict[ObjectKind, str] = {
    ObjectKind.GRADIENT: "grads",
    ObjectKind.GRADIENT_COMMIT: "grads",
    ObjectKind.SCORES: "scores",
    ObjectKind.MODEL_PATCH: "model",
    ObjectKind.MODEL_DELTA: "model",
    ObjectKind.CHECKPOINT: "model",
    ObjectKind.MODEL_MANIFEST: "model",
    ObjectKind.ROOM_MANIFEST: "room",
    ObjectKind.DATASET_SHARD: "data",
    ObjectKind.DATASET_MANIFEST: "data",
    ObjectKind.WEIGHTS: "weights",
    ObjectKind.DATA_GRANT: "grants",
    ObjectKind.RUN_FINAL: "final",
    ObjectKind.CHECKS: "scores",
    ObjectKind.CHECK_ANSWER: "grads",
}


def lane_of(kind: ObjectKind, lane: str | None = None) -> str:
    """`lane` checked, or the default lane of `kind` when None."""
    name = DEFAULT_LANES[ObjectKind(kind)] if lane is None else lane
    if not _LANE.fullmatch(name):
        raise ValueError(f"lane must match {_LANE.pattern}: {name!r}")
    return name


@dataclass(frozen=True)
class KeyParts:
    """The fields a key encodes; `window` is None for a `latest_key`."""

    version: int
    run: str
    kind: ObjectKind
    window: int | None
    sender: str
    lane: str


def object_key(
    run: str,
    kind: ObjectKind,
    window: int,
    sender: str,
    *,
    lane: str | None = None,
    version: int = PROTOCOL_VERSION,
) -> str:
    """The key of `sender`'s object of `kind` on `lane` for `window` (or round, or shard index)."""
    prefix = window_prefix(run, kind, window, lane=lane, version=version)
    return f"{prefix}{_check_sender(sender)}"


def window_prefix(
    run: str,
    kind: ObjectKind,
    window: int,
    *,
    lane: str | None = None,
    version: int = PROTOCOL_VERSION,
) -> str:
    """The prefix under which every sender's object of `kind` on `lane` for `window` lives."""
    if window < 0 or window >= 10**_WINDOW_DIGITS:
        raise ValueError(f"window out of range: {window}")
    return f"{kind_prefix(run, kind, lane=lane, version=version)}{window:0{_WINDOW_DIGITS}d}/"


def kind_prefix(
    run: str, kind: ObjectKind, *, lane: str | None = None, version: int = PROTOCOL_VERSION
) -> str:
    """The prefix of every object of `kind` on `lane` in `run`, all windows."""
    if not _RUN.fullmatch(run):
        raise ValueError(f"run id must match {_RUN.pattern}: {run!r}")
    return f"{ROOT}/v{int(version)}/{run}/{lane_of(kind, lane)}/{ObjectKind(kind).value}/"


def dataset_prefix(name: str, *, version: int = PROTOCOL_VERSION) -> str:
    """Where a dataset (its manifest and token shards) lives in the dataset owner's bucket."""
    if not _RUN.fullmatch(name):
        raise ValueError(f"dataset name must match {_RUN.pattern}: {name!r}")
    return f"{ROOT}/v{int(version)}/datasets/{name}/"


def latest_key(
    run: str,
    kind: ObjectKind,
    sender: str,
    *,
    lane: str | None = None,
    version: int = PROTOCOL_VERSION,
) -> str:
    """The single overwritable pointer of `sender` for `kind` (e.g. the newest model manifest)."""
    return f"{kind_prefix(run, kind, lane=lane, version=version)}latest/{_check_sender(sender)}"


def parse_key(key: str) -> KeyParts:
    """Invert `object_key` / `latest_key`; raises ValueError for any other key."""
    parts = key.split("/")
    if len(parts) != 7 or parts[0] != ROOT or not re.fullmatch(r"v[0-9]{1,6}", parts[1]):
        raise ValueError(f"not a Beam key: {key!r}")
    _, version, run, lane, kind, window, sender = parts
    if window == "latest":
        number = None
    elif re.fullmatch(rf"[0-9]{{{_WINDOW_DIGITS}}}", window):
        number = int(window)
    else:
        raise ValueError(f"bad window in key: {key!r}")
    try:
        parsed = KeyParts(
            int(version[1:]),
            run,
            ObjectKind(kind),
            number,
            _check_sender(sender),
            lane_of(ObjectKind(kind), lane),
        )
    except ValueError as exc:
        raise ValueError(f"not a Beam key: {key!r} ({exc})") from None
    if not _RUN.fullmatch(run):
        raise ValueError(f"bad run id in key: {key!r}")
    return parsed


def _check_sender(sender: str) -> str:
    if not _SENDER.fullmatch(sender):
        raise ValueError(f"sender must be an ss58 address: {sender!r}")
    return sender
