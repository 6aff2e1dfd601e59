"""A local room for any builtin topology: the rooms harness with the topology's own slots.

The owner creates the room and fills the run lead's slot; every other member is invited with
exactly what its slot needs, redeems the invite with its own wallet and is admitted; the owner
publishes the run pinned to the topology's exact version, with round 0 starting once every
process had time to start; each member then runs as its own OS process through
``neurons/*.py --room ... --run ...``. What the checks read afterwards is only what the
processes left behind: their metrics files and the signed objects in their buckets.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from subnet.room import ops
from subnet.room.address import RoomAddress
from subnet.room.invite import make_invite
from subnet.room.local import KEYS, LocalRoom, RoomSettings
from subnet.room.membership import slot_needs
from subnet.room.runs import publish_run
from subnet.topology import Template, load_spec
from subnet.topology.params import resolve, substitute

ENTRY = {"miner": "neurons/miner.py", "validator": "neurons/validator.py",
         "holder": "neurons/model_holder.py"}  # fmt: skip


def lead_slot(spec) -> str:
    """The slot the owner fills: the holder-class slot holding run.lead (else the first)."""
    holders = [n for n, r in spec.roles.items() if r.role_class == "holder"]
    return next((n for n in holders if "run.lead" in spec.roles[n].holds), holders[0])


class TopologyRoom(LocalRoom):
    """``LocalRoom`` running ``template``'s topology with each slot at its minimum."""

    def __init__(self, root: str | Path, settings: RoomSettings, template: Template,
                 start_in: float = 25.0, phases: tuple[int, int] | None = None,
                 **room) -> None:  # fmt: skip
        """``phases``: the window's (upload_deadline, report_deadline) in ticks, instead of the
        settings' half and seven tenths of the window."""
        super().__init__(root, settings, **room)
        self.template, self.spec = template, load_spec(template.topology)
        self.start_in, self.phases = start_in, phases
        values = resolve(self.spec.params, dict(template.params))
        lead = lead_slot(self.spec)
        self.slots: dict[str, str] = {"holder": lead}  # member name -> slot; the owner leads
        for slot, role in self.spec.roles.items():
            count = max(1, substitute(role.min, values)) - (slot == lead)
            self.slots.update({f"{slot}{i}": slot for i in range(count)})
        self.origin = 0.0

    def setup(self, origin: float | None = None) -> None:
        """S3 server, room, invites redeemed and admitted, the run published (round 0 at
        ``origin``, unix time; default: ``start_in`` seconds from now)."""
        self.admit_members()
        self.publish(time.time() + self.start_in if origin is None else origin)

    def admit_members(self) -> None:
        """S3 server, room, every member invited for its slot's needs, redeemed and admitted."""
        self.server.start()
        self.address = RoomAddress(self.server.endpoint_url, self.bucket("holder"),
                                   self.settings.room)  # fmt: skip
        rs = self.address.open(KEYS)
        owner = self.wallet("holder").hotkey
        ops.create_room(rs, owner, self.read("holder"), [self.slots["holder"]])
        needs = slot_needs(self.spec)
        for name, slot in self.slots.items():
            if name == "holder":
                continue
            invite = make_invite(owner, rs.latest().body, str(self.address), sorted(needs[slot]),
                                 [slot], 3600.0)  # fmt: skip
            ops.join_room(rs, self.wallet(name).hotkey, invite, self.read(name))
        ops.admit(rs, owner)

    def publish(self, origin: float) -> None:
        """Publish the run pinned to the topology's exact version, round 0 at ``origin``."""
        s = self.settings
        self.origin = origin
        protocol = s.protocol()
        if self.phases:
            upload, report = self.phases
            window = type(protocol.window).model_validate({**protocol.window.model_dump(),
                                                           "upload_deadline": upload,
                                                           "report_deadline": report})  # fmt: skip
            protocol = protocol.model_copy(update={"window": window})
        publish_run(self.rooms(), self.wallet("holder").hotkey, s.run, self.template, protocol,
                    s.tick_seconds, self.origin)  # fmt: skip
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "run.json").write_text(json.dumps({
            "topology": self.template.topology, "params": dict(self.template.params),
            "origin": self.origin, "members": {n: [self.hotkeys[n], s] for n, s in self.slots.items()},
        }, indent=2))  # fmt: skip

    def start(self) -> None:
        """Set up, then start every member's process."""
        self.setup()
        self.spawn_all()

    def spawn_all(self) -> None:
        """Start every member's process."""
        for name, slot in self.slots.items():
            self.spawn(name, slot, ENTRY[self.spec.roles[slot].role_class])

    def window_now(self) -> float:
        """The run's current window (negative before round 0)."""
        return (time.time() - self.origin) / self.settings.tick_seconds / self.settings.window_ticks

    def metrics(self, name: str) -> list[dict]:
        """Every record member ``name``'s process wrote."""
        paths = list((self.root / "state").glob(f"*-{self.hotkeys[name][:8]}/metrics.jsonl"))
        if not paths:
            return []
        return [json.loads(line) for line in paths[0].read_text().splitlines() if line.strip()]


class RoomRun:
    """The checks' view of a finished room run, shaped like the in-memory one."""

    def __init__(self, room: TopologyRoom, rounds: int, codes: dict[str, int | None]) -> None:
        self.room, self.rounds, self.codes = room, rounds, codes
        self.results: dict = {}  # what the run's harness recorded beyond the members' files

    def names(self, slot: str) -> list[str]:
        return sorted((n for n, s in self.room.slots.items() if s == slot),
                      key=lambda n: self.room.hotkeys[n])  # fmt: skip

    def events(self, slot: str, event: str) -> list[dict]:
        """Records of ``event`` by the slot's members (a run that never stops by itself is
        stopped during a window after its last round: its records past the rounds are cut; a
        run that stops itself keeps all, e.g. the grant for the round it stops at)."""
        cut = self.rounds if self.room.spec.stop["rule"] == "never" else None
        return [r for n in self.names(slot) for r in self.room.metrics(n)
                if r["event"] == event and (cut is None or r.get("window", -1) < cut)]  # fmt: skip

    def hotkeys(self, slot: str) -> set[str]:
        return {self.room.hotkeys[n] for n in self.names(slot)}

    def member_events(self, slot: str, event: str) -> dict[str, list[dict]]:
        """hotkey -> its records of ``event`` (cut as ``events``), for each member of ``slot``."""
        cut = self.rounds if self.room.spec.stop["rule"] == "never" else None
        return {
            self.room.hotkeys[n]: [
                r
                for r in self.room.metrics(n)
                if r["event"] == event and (cut is None or r.get("window", -1) < cut)
            ]
            for n in self.names(slot)
        }
