"""@beam/scored-subnet in a room, end to end: no chain, a real S3 server, every member its own
OS process through ``neurons/*.py --room ... --run ...`` on the ``tiny`` preset.

Asserts what room mode promises: held-out loss goes down over at least 3 merged rounds; every
version is published and every member ends on the holder's model digest; a noise miner gets
near-zero merge weight; a member that was never invited is refused at start; a validator whose
``runs.score`` is revoked mid-run stops counting from the next window.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from subnet.compression import state_digest
from subnet.localnet.run import read_records
from subnet.room import ops
from subnet.room.errors import RoomError
from subnet.room.local import LocalRoom, RoomSettings
from subnet.versions.manifest import read_pointer

MERGES = 3
pytestmark = pytest.mark.slow


def wait_for(
    room: LocalRoom, predicate, windows: float, what: str, stopped: set[str] = frozenset()
) -> None:
    """Until ``predicate()``, for at most ``windows`` windows of the run's (paced) clock."""
    deadline = max(room.window_now(), 0) + windows
    while not predicate():
        dead = [n for n, up in room.alive().items() if not up and n not in {"stranger", *stopped}]
        assert not dead, f"members exited early: {dead}; see {room.root / 'logs'}"
        assert room.window_now() < deadline, f"timed out waiting for {what}; see {room.root}"
        time.sleep(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory, iambic_1024):
    root, data = tmp_path_factory.mktemp("room-e2e"), iambic_1024
    settings = RoomSettings(miners=3, validators=2, dataset="iambic-v1024", data_dir=str(data),
                            scripts={"miner3": "tests/integration/noise_miner.py"})  # fmt: skip
    room = LocalRoom(root / "run", settings)
    try:
        room.start()
        room.spawn("stranger", "miner")  # never invited
        merged = lambda: [v for v in room.versions() if v["version"] > 0]  # noqa: E731
        wait_for(
            room,
            lambda: any(v["reports"] == 2 for v in merged()),
            12,
            "a merged version scored by both validators",
        )
        # Revoke validator2's runs.score mid-run; note the window it happened in.
        _revoke(room, "validator2", ["runs.score"])
        revoked_in = int(room.window_now())
        after = lambda: len(merged()) >= MERGES and merged()[-1]["window"] > revoked_in + 1  # noqa: E731
        wait_for(room, after, 12, "merges after the revocation")
        holder_store = room.rooms().store
        pointer = read_pointer(holder_store, settings.run, room.hotkeys["holder"])
        codes = room.stop(["holder"])
        # Everyone syncs to the last version in its next sync step (a window or two on a busy
        # machine); the test on digests below reports whoever did not.
        synced = lambda: _saved_versions(room.root) == {pointer.version}  # noqa: E731
        wait_for(room, synced, 10, "every member on the last version", {"holder"})
        codes.update(room.stop())
        yield {"root": room.root, "room": room, "codes": codes, "revoked_in": revoked_in,
               "pointer": pointer}  # fmt: skip
    finally:
        room.stop()


def _revoke(room: LocalRoom, name: str, permissions: list[str]) -> None:
    """Revoke as the owner; again if the owner's pacemaker published a version meanwhile."""
    for _ in range(5):
        try:
            ops.revoke(room.rooms(), room.wallet("holder").hotkey, room.hotkeys[name], permissions)
            return
        except RoomError as error:
            if error.reason != "conflict":
                raise
    raise AssertionError("the manifest changed under every revocation")


def _saved_versions(root: Path) -> set[int | None]:
    """The model version each member's state file holds now (None: being replaced)."""
    out = set()
    for path in (root / "state").glob("*/state.json"):
        try:
            out.add(json.loads(path.read_text()).get("version"))
        except (OSError, ValueError):
            out.add(None)
    return out


def _dirs(run) -> dict[str, Path]:
    names = {hk[:8]: n for n, hk in run["room"].hotkeys.items()}
    return {names[d.name.split("-")[1]]: d for d in (run["root"] / "state").iterdir()}


def test_members_exit_cleanly_and_the_stranger_is_refused(run):
    codes = run["codes"]
    assert codes.pop("stranger") == 2, "a never-invited member must be refused at start"
    log = (run["root"] / "logs" / "stranger.out").read_text()
    assert "is not a member of room 'lab'" in log and "Traceback" not in log
    assert all(code == 0 for code in codes.values()), codes


def test_every_version_published_and_loss_goes_down(run):
    versions = read_records(_dirs(run)["holder"] / "metrics.jsonl", "version")
    assert [v["version"] for v in versions] == list(range(len(versions)))
    assert len(versions) - 1 >= MERGES
    assert run["pointer"].version == versions[-1]["version"]  # the last one is out, signed
    assert versions[-1]["heldout_loss"] < versions[0]["heldout_loss"]


def test_noise_miner_gets_near_zero_merge_weight(run):
    hk = run["room"].hotkeys
    merged = [v for v in read_records(_dirs(run)["holder"] / "metrics.jsonl", "version")
              if v["version"] > 0]  # fmt: skip
    noise = sum(v["contributors"].get(hk["miner3"], 0.0) for v in merged)
    honest = sum(v["contributors"].get(hk[f"miner{i}"], 0.0) for v in merged for i in (1, 2))
    assert honest > 0 and noise / (noise + honest) < 0.08, (noise, honest)


def test_revoked_scorer_stops_counting_from_the_next_window(run):
    merged = [v for v in read_records(_dirs(run)["holder"] / "metrics.jsonl", "version")
              if v["version"] > 0]  # fmt: skip
    after = [v for v in merged if v["window"] > run["revoked_in"]]
    before = [v for v in merged if v["window"] <= run["revoked_in"]]
    assert after and all(v["reports"] <= 1 for v in after), after
    assert any(v["reports"] == 2 for v in before), before
    log = (run["root"] / "logs" / "holder.out").read_text()
    assert f"{run['room'].hotkeys['validator2']} does not count as validator" in log


def test_every_member_ends_on_the_holders_digest(run):
    final = read_records(_dirs(run)["holder"] / "metrics.jsonl", "version")[-1]
    digests = {}
    for name, folder in _dirs(run).items():
        meta = json.loads((folder / "state.json").read_text())
        model = {k.split("/", 1)[1]: v for k, v in load_file(folder / "state.safetensors").items()
                 if k.startswith("model/")}  # fmt: skip
        digests[name] = (meta["version"], state_digest(model).hex())
    assert {v for v, _ in digests.values()} == {final["version"]}, digests
    assert len({d for _, d in digests.values()}) == 1, digests
    assert run["pointer"].digest == next(iter(digests.values()))[1]
