"""Every builtin topology as a real room run: each member its own OS process running
``neurons/*.py --room ... --run ...``, the topology pinned by exact version, the ``tiny``
preset, all 13 runs at once over one local S3 server (moto).

The 13 rooms (42 member processes) run together in one module-scoped fixture, each with its own
room, run, buckets and folder; the parametrized tests then read only what each run left behind
(its members' metrics files and the signed objects in their buckets): the topology's defining
property (the same checks as the in-memory runs), no failed window for any member, every
process exiting cleanly, and, for every merged round, each expected writer's signed upload on
the lane the plan says (checked while the server is up). Members are forked from a fork
server that paid the imports once (``forkserver.py`` says why). A failing test prints when each
member was running relative to round 0, so a slow boot is not mistaken for a topology defect.
Under xdist the rooms run once per session, whichever worker needs them first (a file lock).
The runs are timed by the wall clock: when the whole machine stopped during them (a paused VM,
a clock that jumped; ``stalls.py``) they measured the machine, and they are run once again.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from filelock import FileLock
from forkserver import ForkServer
from stalls import Heartbeat
from test_in_memory import NOT_YET, PROPERTIES, SMALL
from topology_rooms import RoomRun, TopologyRoom  # noqa: I001 (tests/topologies on sys.path)

from subnet.childproc import spawn, stop_all
from subnet.room.local import KEYS, RoomSettings
from subnet.storage.config import StorageConfig
from subnet.storage.keys import ObjectKind, latest_key, object_key
from subnet.storage.local_server import MotoServer
from subnet.storage.s3 import S3Store
from subnet.topology import Template, load_spec

# One fixture runs every selected topology's room at once: the module's tests stay on one xdist
# worker (``--dist loadgroup``), so the rooms run once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("topology-rooms")]
# 44 s rounds of 2 s ticks: trainers have 26 s (sync, grant, 2 steps, upload: round 0, when 28
# trainers take their first steps at once, is the slowest), validators 10 s (sync, score,
# report), holders 8 s to merge. At load average 50-60 on the 2 cores, 20 s rounds (4 s to
# score) missed reports and uploads, and 1 s ticks doubled every member's polling of the gates.
TICK, WINDOW, PHASES = 2.0, 22, (13, 18)
START_IN = 45.0  # seconds from publishing a run (then starting its members) to its round 0:
# every member (forked, so no imports to pay) reads the room, compiles the plan and loads the
# data before it. The 13 runs are published one after another, so their rounds start spread
# out (by a fork's time each, about 1 s under load) and their bursts of work do not coincide.
# BEAM_ROOM_SPAWN=exec starts every member as a fresh `python neurons/...` instead of a fork: the
# same runs, minus the fork server, with round 0 later by a fresh interpreter's boot per member.
EXEC_BOOT_S = 8.0


def template_for(ref: str, rounds: int) -> Template:
    spec = load_spec(ref)
    params = {k: v for k, v in SMALL.items() if k in spec.params}
    params.update({k: rounds for k in ("rounds", "max_rounds") if k in spec.params})
    return Template(topology=ref, params=params)


def tag(ref: str) -> str:
    """``@beam/fedavg-live@1.0.0`` -> ``fedavg-live`` (room, bucket and folder names)."""
    return ref.split("/")[1].split("@")[0]


def finished(room: TopologyRoom, rounds: int) -> bool:
    """Every member exited (a run that stops itself), one failed (its test says so), or the run
    is well past its last round: into the window after it for a run that never stops (its last
    round is merged by then), half a window more for one that stops itself but did not."""
    codes = [p.poll() for p in room.procs.values()]
    if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
        return True
    never = load_spec(room.template.topology).stop["rule"] == "never"
    return room.window_now() >= rounds + (0.9 if never else 1.5)


def selected(session: pytest.Session) -> list[str]:
    """The topologies whose tests this session runs (all 13 unless ``-k`` or an id narrows)."""
    refs = {item.callspec.params["ref"] for item in session.items
            if item.path == Path(__file__) and hasattr(item, "callspec")}  # fmt: skip
    return sorted(refs) or sorted(PROPERTIES)


def make_rooms(root: Path, refs: list[str], data: Path, **room) -> dict[str, TopologyRoom]:
    """Each topology's room (not yet set up) in ``root/<topology>``."""
    rooms = {}
    for ref in refs:
        settings = RoomSettings(dataset="tiny", data_dir=str(data), tick_seconds=TICK,
                                window_ticks=WINDOW, inner_steps=2, room=tag(ref), run="topo",
                                buckets=f"beam-{tag(ref)}")  # fmt: skip
        rooms[ref] = TopologyRoom(root / tag(ref), settings, template_for(ref, PROPERTIES[ref][0]),
                                  phases=PHASES, **room)  # fmt: skip
    return rooms


def run_rooms(root: Path, refs: list[str], data: Path) -> bool:
    """``_run_rooms`` while a heartbeat watches for the machine stopping (``stalls.py``); whether
    it stopped."""
    with Heartbeat() as heartbeat:
        _run_rooms(root, refs, data, heartbeat)
    return bool(heartbeat.stalls)


def _run_rooms(root: Path, refs: list[str], data: Path, heartbeat: Heartbeat) -> None:
    """Run the rooms of ``refs`` at once to their ends; write what the checks need beyond the
    members' files (exit codes, the uploads check, which needs the S3 server) to
    ``root/results.json``."""
    fresh = os.environ.get("BEAM_ROOM_SPAWN", "fork") == "exec"
    forks = None if fresh else ForkServer(root)
    server = MotoServer(log_path=root / "moto.log")
    rooms: dict[str, TopologyRoom] = {}
    try:
        server.start()
        rooms = make_rooms(root, refs, data, server=server,
                           launch=spawn if fresh else forks.spawn)  # fmt: skip
        with ThreadPoolExecutor(len(rooms)) as pool:  # mostly waiting on the S3 server
            list(pool.map(TopologyRoom.admit_members, rooms.values()))
        if forks is not None:
            forks.ready()  # round 0 is timed from a fork server that can fork
        for room in rooms.values():  # each run's round 0 is timed from its own members' start
            room.publish(time.time() + START_IN + (EXEC_BOOT_S * len(room.slots) if fresh else 0))
            room.spawn_all()
        while not all(finished(room, PROPERTIES[ref][0]) for ref, room in rooms.items()):
            time.sleep(1)
        procs = [(room, name) for room in rooms.values() for name in room.procs]
        codes = stop_all([room.procs[name] for room, name in procs], timeout=30)
        results = {}
        for ref, room in rooms.items():
            run = RoomRun(room, PROPERTIES[ref][0],
                          {n: c for (r, n), c in zip(procs, codes, strict=True) if r is room})  # fmt: skip
            try:
                check_uploads(run)
                uploads = None
            except AssertionError as error:
                uploads = f"a merged contributor's upload is missing: {error}"
            except Exception as error:  # noqa: BLE001 (one run's check must not stop the others')
                uploads = f"the uploads check failed: {error!r}"
            results[ref] = {"codes": run.codes, "uploads": uploads,
                            "endpoint": server.endpoint_url, "bucket": room.address.bucket}  # fmt: skip
        results["machine"] = {"stalls": heartbeat.stalls, "worst_lag_s": round(heartbeat.worst, 2)}
        (root / "results.json").write_text(json.dumps(results, indent=2))
    finally:
        stop_all([p for room in rooms.values() for p in room.procs.values()], timeout=30)
        if forks is not None:
            forks.stop()
        server.stop()


@pytest.fixture(scope="module")
def room_runs(request, tmp_path_factory, neuron_data_dir) -> dict[str, RoomRun]:
    """The selected runs, all at once, run once per test session: under xdist the first worker
    to get here runs them while another one that gets here waits for its results (whatever
    ``--dist`` did with the module's tests)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "topology-rooms"
    refs = selected(request.session)
    with FileLock(f"{root}.lock"):
        if not (root / "results.json").exists():
            root.mkdir(parents=True, exist_ok=True)
            if run_rooms(root, refs, neuron_data_dir):  # the machine stopped during the runs
                root.rename(root.with_name(f"{root.name}-stalled"))  # kept to read
                root.mkdir()
                run_rooms(root, refs, neuron_data_dir)  # once: what it gives, counts
    results = json.loads((root / "results.json").read_text())
    runs = {}
    for ref, room in make_rooms(root, refs, neuron_data_dir).items():
        for name in room.slots:
            room.wallet(name)  # its hotkey, from the wallet the run created
        room.origin = json.loads((room.root / "run.json").read_text())["origin"]
        runs[ref] = RoomRun(room, PROPERTIES[ref][0], results[ref]["codes"])
        runs[ref].results = results[ref]
        runs[ref].machine = results["machine"]
    return runs


def boot_times(run: RoomRun) -> dict[str, float | None]:
    """Seconds from round 0 to each member's ``running slot`` log line (None: never)."""
    room = run.room
    out: dict[str, float | None] = {}
    for name in room.slots:
        out[name] = None
        text = (room.root / "logs" / f"{name}.out").read_text()
        for line in text.splitlines():
            if "running slot" in line and (m := re.match(r"(\d\d):(\d\d):(\d\d\.\d+)", line)):
                h, mi, sec = m.groups()
                day = room.origin - room.origin % 86400  # the logs' clock is UTC, as time.time
                out[name] = round(day + int(h) * 3600 + int(mi) * 60 + float(sec) - room.origin, 1)
                break
    return out


def check_uploads(run: RoomRun) -> None:
    """Each merged round: every contributor's signed upload is in its own bucket, on a lane the
    plan says its slot writes, under the run's key layout."""
    room = run.room
    plan = load_spec(room.template.topology)
    uploads = {ObjectKind.GRADIENT.value, ObjectKind.CHECKPOINT.value}  # updates, whole models
    lanes = [(n, ObjectKind(lane.kind)) for n, lane in plan.lanes.items() if lane.kind in uploads]
    by_hotkey = {hk: n for n, hk in room.hotkeys.items()}
    for slot in {s for s in room.slots.values()}:
        for v in [v for v in run.events(slot, "version") if v["version"] > 0]:
            for contributor in v.get("contributors", {}):
                if contributor not in by_hotkey:  # a sweep point's model (final merge)
                    check_point_stream(run, slot, contributor)
                    continue
                store = _store(room, by_hotkey[contributor])
                keys = [object_key("topo", kind, v["window"], contributor, lane=lane)
                        for lane, kind in lanes]  # fmt: skip
                assert any(_exists(store, k) for k in keys), (contributor, v["window"], lanes)


def check_point_stream(run: RoomRun, slot: str, stream: str) -> None:
    """A final merge's contributor that is not a member is one of the slot's sweep points'
    model streams (``model.pI``), whose latest signed manifest is in the slot's bucket."""
    assert re.fullmatch(r"[a-z][a-z0-9_]*\.p\d+", stream), stream
    pointers = [(name, latest_key("topo", ObjectKind.MODEL_MANIFEST, run.room.hotkeys[name],
                                  lane=stream)) for name in run.names(slot)]  # fmt: skip
    assert any(_exists(_store(run.room, name), key) for name, key in pointers), (slot, stream)


def _store(room, name: str) -> S3Store:
    return S3Store.from_config(StorageConfig(
        bucket=room.bucket(name), endpoint_url=room.server.endpoint_url, addressing_style="path",
    ), KEYS)  # fmt: skip


def _exists(store, key: str) -> bool:
    try:
        return store.head(key) is not None
    except Exception:  # noqa: BLE001 (absent)
        return False


def _param(ref: str):
    marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[ref])] if ref in NOT_YET else []
    return pytest.param(ref, marks=marks, id=ref)


@pytest.mark.parametrize("ref", [_param(r) for r in sorted(PROPERTIES)])
def test_topology_runs_as_a_room(room_runs, ref):
    run = room_runs[ref]  # every member's process has exited: the checks read what it left
    try:
        check_run(run, ref)
    except AssertionError as error:  # say whether a member was late (a slow boot, not a defect)
        when = f"members running (s after round 0): {boot_times(run)}; the machine: {run.machine}"
        raise AssertionError(f"{error}\n{when}; logs in {run.room.root / 'logs'}") from None


def check_run(run: RoomRun, ref: str) -> None:
    logs = run.room.root / "logs"
    assert all(code in (0, None) for code in run.codes.values()), (run.codes, logs)
    failed = {n: [r for r in run.room.metrics(n) if r["event"] == "window_failed"]
              for n in run.room.slots}  # fmt: skip
    assert not any(failed.values()), failed
    PROPERTIES[ref][1](run)
    assert run.results["uploads"] is None, run.results["uploads"]


def test_the_runs_shared_one_server_and_kept_apart(room_runs):
    """One S3 server for all the runs, each in its own room and buckets."""
    results = [run.results for run in room_runs.values()]
    assert len({r["endpoint"] for r in results}) == 1
    assert len({r["bucket"] for r in results}) == len(results)
    assert all(json.loads((run.room.root / "run.json").read_text())["topology"] == ref
               for ref, run in room_runs.items())  # fmt: skip
