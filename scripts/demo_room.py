"""`make demo-room`: any builtin topology as a private room on this machine, no chain, then its run page.

Prepares the default dataset if missing, times an inner step and an evaluation pass here (under
the machine's current load) and sizes the window from them, starts an S3 server, creates a room
owned by the member that leads the run, invites every other member into the topology's slots
(signed, single-use invites each redeemed by the member's own wallet and admitted), publishes
the run pinned to the topology's exact version, starts every member as its own process through
``neurons/*.py --room ... --run ...``, prints one line per round, stops everything and writes
the run page. Ctrl-C stops every process. While it runs, a pacemaker lengthens the run's ticks
whenever the work its members measure needs it (`pacemaker: ticks stretched from 0.50 s to
0.81 s (validator1 score took ...)`), ahead of time and through the room's manifest
(subnet/room/pace.py), and shortens them again when the load goes; `--fixed-ticks` keeps them.

    python scripts/demo_room.py                                    # @beam/scored-subnet@2.0.0
    python scripts/demo_room.py --topology @beam/gossip-ring@1.0.0 --param mix=0.25
    python scripts/demo_room.py --miners 3 --rounds 10             # the scored subnet, bigger
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from subnet.cli import ArgParser, run_guarded
from subnet.config import ConfigError
from subnet.logs import setup_logging
from subnet.room.local import SUBNET, LocalRoom, RoomSettings
from subnet.room.template import parse_params
from subnet.room.watch import Round, round_line, round_of, summary
from subnet.topology import PlanError, load_spec

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = ArgParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--topology", default=SUBNET, help="@beam/NAME@VERSION (docs/topologies.md)"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topology parameter (repeat for several)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds to run (merged versions)")
    parser.add_argument("--miners", type=int, default=2, help="members of a `miner` slot")
    parser.add_argument("--validators", type=int, default=2, help="members of a `validator` slot")
    parser.add_argument(
        "--preset", default="tiny", help="model preset: tiny, small, hypertrain-20m"
    )
    parser.add_argument(
        "--inner-steps",
        type=int,
        default=20,
        help="H: inner steps per round (as make demo: enough for a miner to prove its gain)",
    )
    parser.add_argument("--tick-seconds", type=float, default=0.5, help="seconds per tick")
    parser.add_argument(
        "--window-ticks",
        type=int,
        default=None,
        help="ticks per window (default: calibrated here, at least 20)",
    )
    parser.add_argument(
        "--fixed-ticks", action="store_true", help="keep the tick length (no pacemaker)"
    )
    parser.add_argument("--run-dir", default=None, help="default: runs/room-<topology>-<time>")
    args = parser.parse_args()
    setup_logging(node="demo-room")
    try:
        spec = load_spec(args.topology)
    except PlanError as error:
        raise ConfigError(f"--topology {args.topology}: {error}") from None
    settings = RoomSettings(
        miners=args.miners,
        validators=args.validators,
        rounds=args.rounds,
        preset=args.preset,
        data_dir=str(ROOT / "data"),
        tick_seconds=args.tick_seconds,
        inner_steps=args.inner_steps,
        topology=spec.ref,
        params=parse_params(spec, args.param),
        paced=not args.fixed_ticks,
    )
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "prepare_data.py"),
            "--out",
            str(ROOT / "data" / settings.dataset),
        ],
        check=True,
    )
    size_window(settings, args.window_ticks)
    name = spec.name.removeprefix("@beam/")
    run_dir = Path(args.run_dir or ROOT / "runs" / time.strftime(f"room-{name}-%Y%m%d-%H%M%S"))
    room = LocalRoom(run_dir, settings)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        room.start()
        members = ", ".join(f"{n} ({slot})" for n, slot in settings.members().items())
        print(
            f"\nroom {room.address}, run {settings.run} of {spec.ref}; members: {members}"
            f"\nround 0 starts in {room.origin - time.time():.0f} s; run folder: {run_dir}",
            flush=True,
        )
        finished, rounds = watch(room, spec)
    except KeyboardInterrupt:
        print("\ninterrupted; stopping every process")
        room.stop()
        return 130
    except BaseException:
        room.stop()
        raise
    codes = room.stop()
    seconds = max(0.0, time.time() - room.origin)
    start = [v["heldout_loss"] for v in room.versions() if v.get("version") == 0]
    for line in summary(rounds, seconds, start[0] if start else None):
        print(line)
    report = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "report.py"), str(run_dir)],
        capture_output=True,
        text=True,
    )
    page = report.stdout.strip().splitlines()[-1] if report.returncode == 0 else "unavailable"
    print(f"run page: {page}")
    # A run whose stop rule ended it exits 0 by itself; the rest were stopped by SIGTERM (0).
    bad = {n: c for n, c in codes.items() if c not in (0, None)}
    print(
        "all processes stopped"
        + (f" (non-zero exit codes: {bad}; logs in {run_dir / 'logs'})" if bad else "")
    )
    return 0 if finished and not bad else 1


def size_window(settings: RoomSettings, ticks: int | None) -> None:
    """The window: ``ticks`` as given, or calibrated from an inner step and an evaluation pass
    timed here (``subnet.localnet.calibrate``), so every phase fits this machine now."""
    if ticks:
        settings.window_ticks = ticks
        return
    from subnet.data import TokenDataset
    from subnet.localnet.calibrate import calibrate

    slots = list(settings.members().values())
    spec = load_spec(settings.topology)
    classes = [spec.roles[s].role_class for s in slots]
    vocab = TokenDataset.from_folder(Path(settings.data_dir) / settings.dataset, 64).vocab_size
    steps = max(
        (
            v
            for k, v in settings.template().params.items()
            if k in ("inner_steps", "local_steps") and isinstance(v, int)
        ),
        default=settings.inner_steps,
    )
    cal = calibrate(
        settings.preset,
        vocab,
        steps,
        settings.tick_seconds,
        max(1, classes.count("miner")),
        validators=classes.count("validator"),
    )
    print(cal.describe(settings.tick_seconds).replace("blocks", "ticks"), flush=True)
    settings.window_ticks = cal.window_blocks
    settings.phases = (cal.upload_deadline, cal.report_deadline, cal.reveal_deadline)


def watch(room: LocalRoom, spec) -> tuple[bool, list[Round]]:
    """Print each round once it is over, until the run is done; (done, the rounds)."""
    s = room.settings
    members = s.members()
    roles = {n: spec.roles[slot].role_class for n, slot in members.items()}
    never = spec.stop["rule"] == "never"
    # In windows of the run's clock: the pacemaker may lengthen its ticks on a busy machine.
    last_window = 2 * (s.rounds + 4)
    shown: list[Round] = []
    while True:
        records = {n: room.metrics(n) for n in members}
        now = room.window_now()
        while now >= len(shown) + 1.05:  # round w is over (and its merge is published)
            r = round_of(len(shown), records, roles, room.owner)
            shown.append(r)
            print(round_line(r), flush=True)
        codes = {n: p.poll() for n, p in room.procs.items()}
        failed = {n: c for n, c in codes.items() if c not in (None, 0)}
        if failed:
            print(f"members exited with errors: {failed}; see {room.root / 'logs'}")
            return False, shown
        merged = sum(1 for r in shown if r.merged)
        if never and merged >= s.rounds:
            return True, shown
        if all(c is not None for c in codes.values()):  # the stop rule ended every member
            for w in range(len(shown), int(now) + 1):  # the last rounds, not yet shown
                r = round_of(w, {n: room.metrics(n) for n in members}, roles, room.owner)
                if not r.empty:
                    shown.append(r)
                    print(round_line(r), flush=True)
            return True, shown
        if not never and now >= s.rounds + 2:  # past the last round: members that did not
            return True, shown  # stop by themselves are stopped now (their exit codes say how)
        if now > last_window:
            print(
                f"timed out after {len(shown)} rounds ({merged} merged); logs in "
                f"{room.root / 'logs'}"
            )
            return False, shown
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(run_guarded(main))
