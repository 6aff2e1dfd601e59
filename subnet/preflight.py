"""Local checks of a neuron's settings, run before it opens any connection.

``preflight(cfg, role)`` raises ``ConfigError`` with one line naming the mistake and its fix for
what can be known without the network: the torch device, the model preset, the holder's hotkey,
this node's bucket and its key pair, the read-only key pair. A network error never hides one of
these: the first line an operator sees names the real mistake.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .config import HOLDER_HOTKEY_EMPTY, BeamConfig, ConfigError
from .storage.config import StorageConfig, require_bucket

READ_PAIR = ("BEAM_S3_READ_ACCESS_KEY_ID", "BEAM_S3_READ_SECRET_ACCESS_KEY")


def preflight(cfg: BeamConfig, role: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise ConfigError for the first local setting that cannot work (see the module doc)."""
    env = os.environ if environ is None else environ
    check_device(cfg.node.neuron.device)
    check_preset(cfg.protocol.model)
    if cfg.node.room:  # room mode: the room names its members; no holder hotkey, no chain
        if cfg.node.storage is not None:
            check_credentials(cfg.node.storage, env)
        return
    check_holder_hotkey(cfg.protocol.holder_hotkey)
    check_ranks(cfg, role, env)
    check_threads(cfg, role)
    check_credentials(require_bucket(cfg.node.storage), env)
    if bool(env.get(READ_PAIR[0])) != bool(env.get(READ_PAIR[1])):
        raise ConfigError(f"set both {READ_PAIR[0]} and {READ_PAIR[1]}, or neither")


def check_ranks(cfg: BeamConfig, role: str, env: Mapping[str, str]) -> None:
    """A CPU miner whose uploads are checked runs on at most 2 ranks: validators replay a
    multi-rank window by adding the ranks' gradients in rank order, which is gloo's sum for 2
    ranks only (measured on ``tiny``: 4 ranks differ by 6e-7, which a chaotic window amplifies
    past the tolerance)."""
    from .training.distributed import world_size

    world = world_size(env)
    cpu = cfg.node.neuron.device == "cpu"
    if role == "miner" and cpu and cfg.protocol.scoring.checks and world > 2:
        raise ConfigError(
            f"torchrun --nproc_per_node {world}: validators' checks replay a CPU miner bit for "
            "bit on at most 2 ranks; run --nproc_per_node 2, or one process with more "
            "--neuron.threads"
        )


def check_threads(cfg: BeamConfig, role: str) -> None:
    """A miner whose uploads are checked trains on at most ``MAX_THREADS`` CPU threads: a
    validator replays its window on as many, whatever its own cores (``--neuron.threads 0``, the
    default, is held to that at start)."""
    from .wire.schema import MAX_THREADS

    threads = cfg.node.neuron.threads
    if role == "miner" and cfg.protocol.scoring.checks and threads > MAX_THREADS:
        raise ConfigError(
            f"--neuron.threads {threads}: validators replay a checked miner's window on its "
            f"threads, at most {MAX_THREADS}; set --neuron.threads {MAX_THREADS} or less (or "
            "train on 2 ranks)"
        )


def check_device(device: str) -> None:
    """The device string names a device this torch build has."""
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(
            f"--neuron.device {device!r} is not a torch device; use cpu, cuda, cuda:N or mps"
        ) from None
    if parsed.type == "cuda":
        if torch.version.cuda is None:
            raise ConfigError(
                f"--neuron.device {device}: this torch build ({torch.__version__}) has no CUDA; "
                "install a CUDA build (README, GPU) or use --neuron.device cpu"
            )
        count = torch.cuda.device_count()
        if count == 0 or (parsed.index is not None and parsed.index >= count):
            raise ConfigError(
                f"--neuron.device {device}: {count} CUDA device(s) visible; check "
                "CUDA_VISIBLE_DEVICES or use --neuron.device cpu"
            )
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--neuron.device {device}: MPS is not available on this machine")
    elif parsed.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"--neuron.device {device!r}: Beam runs on cpu, cuda or mps")


def check_preset(name: str) -> None:
    """The protocol's model preset exists."""
    from .model.config import PRESETS

    if name not in PRESETS:
        raise ConfigError(
            f"--protocol.model: unknown model preset {name!r}; choose from "
            f"{', '.join(sorted(PRESETS))}"
        )


def check_holder_hotkey(hotkey: str) -> None:
    """``holder_hotkey`` is set and is a valid ss58 address (checksum included)."""
    if not hotkey:
        raise ConfigError(HOLDER_HOTKEY_EMPTY)
    from bittensor.sp_core import ss58_decode

    try:
        ss58_decode(hotkey)
    except (ValueError, TypeError) as error:
        raise ConfigError(
            f"--protocol.holder_hotkey {hotkey!r} is not a valid ss58 address ({error}); copy it "
            "from the subnet's protocol.toml"
        ) from None


def check_credentials(storage: StorageConfig, env: Mapping[str, str]) -> None:
    """This node's write key pair can be loaded; the message names both ways to give it."""
    from .storage.credentials import CredentialsError, load_credentials

    try:
        load_credentials(storage.credentials, env)
    except CredentialsError as error:
        c = storage.credentials
        raise ConfigError(
            f"no storage keys for bucket {storage.bucket} ({error}): set {c.access_key_id_env} "
            f"and {c.secret_access_key_env}, or point --storage.credentials.access_key_id_file "
            "and --storage.credentials.secret_access_key_file at files; see docs/storage.md"
        ) from None


def bucket_hint(storage: StorageConfig, reason: str) -> str:
    """How to fix an unusable bucket, by the storage reason code."""
    if reason == "bucket_not_found":
        where = f" --endpoint-url {storage.endpoint_url}" if storage.endpoint_url else ""
        return (
            f"create it first, e.g. `aws s3 mb s3://{storage.bucket}{where}` (R2: the Cloudflare "
            "dashboard or `wrangler r2 bucket create`); see docs/storage.md"
        )
    if reason == "access_denied":
        return "the write keys cannot use this bucket; check them and the bucket's policy"
    if reason == "unreachable":
        return "check --storage.endpoint_url and the network"
    if reason == "no_write_once":
        return (
            "this provider ignores conditional writes (If-None-Match), which Beam's write-once "
            "objects need; use AWS S3, R2, MinIO or moto (docs/storage.md)"
        )
    return "see docs/storage.md"
