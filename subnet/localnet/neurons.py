"""Start Beam's neurons as separate OS processes on a running local stack.

Used by the integration test and the demo: one protocol file shared by every neuron, one
state folder and log file per neuron, and S3 credentials passed through the environment
(never on a command line).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..childproc import spawn, stop_all
from ..storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from .stack import Endpoints

REPO = Path(__file__).resolve().parents[2]
ENTRY = {
    "miner": "neurons/miner.py",
    "validator": "neurons/validator.py",
    "holder": "neurons/model_holder.py",
}


def write_protocol(path: Path, holder_hotkey: str, settings: dict[str, Any]) -> Path:
    """A TOML ``[protocol]`` file (nested tables for window, inner ...) all neurons share."""
    lines = ["[protocol]", f'holder_hotkey = "{holder_hotkey}"']
    tables = {k: v for k, v in settings.items() if isinstance(v, dict)}
    lines += [f"{k} = {_toml(v)}" for k, v in settings.items() if k not in tables]
    for name, values in tables.items():
        lines += ["", f"[protocol.{name}]"] + [f"{k} = {_toml(v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


@dataclass
class NeuronSet:
    """The neuron processes of one local run."""

    root: Path
    endpoints: Endpoints
    protocol: Path
    data_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(
        self,
        name: str,
        role: str,
        script: str | None = None,
        *extra: str,
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        """Start wallet ``name`` as ``role`` (optionally with another entry script); ``env``
        sets (or, None, unsets) variables of its environment, as an operator's shell would
        (the kernels' ``ATEN_CPU_CAPABILITY``, say: another replay class)."""
        ep = self.endpoints
        args = [
            sys.executable,
            str(REPO / (script or ENTRY[role])),
            "--config",
            str(self.protocol),
            "--netuid",
            str(ep.netuid),
            "--subtensor.network",
            ep.network,
            "--wallet.path",
            ep.wallet_path,
            "--wallet.name",
            name,
            "--storage.bucket",
            ep.bucket(name),
            "--storage.endpoint_url",
            ep.s3_endpoint,
            "--storage.addressing_style",
            "path",
            "--neuron.state_dir",
            str(self.root / "state"),
            "--data.dir",
            str(self.data_dir),
            "--logging.dir",
            str(self.root / "logs"),
            "--neuron.threads",
            "1",
            *extra,
        ]
        # moto accepts any key pair; the same dummy pair writes and (published on chain) reads.
        env = {
            **(env or {}),
            "BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
            "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
            "BEAM_S3_READ_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
            "BEAM_S3_READ_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        }
        self.procs[name] = spawn(args, self.root / "logs" / f"{name}.out", env)

    def alive(self) -> dict[str, bool]:
        """Which processes are still running."""
        return {name: p.poll() is None for name, p in self.procs.items()}

    def stop_all_of(self, names: list[str]) -> dict[str, int | None]:
        """SIGTERM the named neurons and wait for them."""
        codes = stop_all([self.procs[n] for n in names], timeout=30)
        return dict(zip(names, codes, strict=True))

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every neuron (they save state and exit); returns exit codes."""
        codes = stop_all(list(self.procs.values()), timeout=30)
        return dict(zip(self.procs, codes, strict=True))
