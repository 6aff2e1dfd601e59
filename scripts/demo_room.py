"""`make demo-room`: @beam/scored-subnet in a private room on this machine, no chain, then its run page.

Prepares the default dataset if missing, starts an S3 server, creates a room owned by the model
holder, invites validators and miners (signed, single-use invites each redeemed by the member's
own wallet and admitted by the owner), publishes a run, starts every member as its own process
through ``neurons/*.py --room ... --run ...``, prints each merged round, stops everything and
writes the run page. Ctrl-C stops every process.

    python scripts/demo_room.py                        # 2 validators, 2 miners, 5 rounds, tiny
    python scripts/demo_room.py --miners 3 --rounds 10
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from subnet.logs import setup_logging
from subnet.monitor.report.units import fmt_bytes
from subnet.room.local import LocalRoom, RoomSettings

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--miners", type=int, default=2)
    parser.add_argument("--validators", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="merged model versions to run")
    parser.add_argument(
        "--preset", default="tiny", help="model preset: tiny, small, hypertrain-20m"
    )
    parser.add_argument("--tick-seconds", type=float, default=0.5, help="seconds per tick")
    parser.add_argument("--window-ticks", type=int, default=40, help="ticks per window")
    parser.add_argument("--run-dir", default=None, help="default: runs/room-<time>")
    args = parser.parse_args()
    setup_logging(node="demo-room")
    settings = RoomSettings(miners=args.miners, validators=args.validators, rounds=args.rounds,
                            preset=args.preset, data_dir=str(ROOT / "data"),
                            tick_seconds=args.tick_seconds, window_ticks=args.window_ticks)  # fmt: skip
    subprocess.run([sys.executable, str(ROOT / "scripts" / "prepare_data.py"), "--out",
                    str(ROOT / "data" / settings.dataset)], check=True)  # fmt: skip
    run_dir = Path(args.run_dir or ROOT / "runs" / time.strftime("room-%Y%m%d-%H%M%S"))
    room = LocalRoom(run_dir, settings)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        room.start()
        print(f"\nroom {room.address}, run {settings.run}; run folder: {run_dir}")
        print(f"{'round':>5} {'window':>6} {'miners':>6} {'reports':>7} {'held-out loss':>13} "
              f"{'sent':>10}")  # fmt: skip
        finished = _watch(
            room, timeout=90 + 3 * args.rounds * args.window_ticks * args.tick_seconds
        )
    except KeyboardInterrupt:
        print("\ninterrupted; stopping every process")
        room.stop()
        return 130
    except BaseException:
        room.stop()
        raise
    codes = room.stop()
    report = subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), str(run_dir)],
                            capture_output=True, text=True)  # fmt: skip
    page = report.stdout.strip().splitlines()[-1] if report.returncode == 0 else "unavailable"
    print(f"run page: {page}")
    ok = finished and all(code == 0 for code in codes.values())
    print("all processes stopped" + ("" if ok else f" (exit codes {codes})"))
    return 0 if ok else 1


def _watch(room: LocalRoom, timeout: float) -> bool:
    """Print each new version until ``rounds`` merged ones; False on timeout."""
    seen, deadline = 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [name for name, up in room.alive().items() if not up]
        if dead:
            raise RuntimeError(f"members exited early: {dead}; see {room.root / 'logs'}")
        versions = room.versions()
        for v in versions[seen:]:
            sent = fmt_bytes(v["bytes"]) if v.get("bytes") else "-"
            print(f"{v['version']:>5} {v['window']:>6} {len(v.get('contributors', {})):>6} "
                  f"{v.get('reports', 0):>7} {v['heldout_loss']:>13.4f} {sent:>10}", flush=True)  # fmt: skip
        seen = len(versions)
        if len([v for v in versions if v["version"] > 0]) >= room.settings.rounds:
            return True
        time.sleep(1)
    return False


if __name__ == "__main__":
    sys.exit(main())
