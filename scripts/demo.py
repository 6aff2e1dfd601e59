"""`make demo`: a real subnet training a model on this machine, then its run page.

Prepares the default dataset if missing, brings up simnet and an S3 server, starts a model
holder, validators and miners as separate processes, runs a fixed number of merged rounds, stops
everything and prints a summary: loss per round, tokens, the bytes each peer sent and received per
round (miners, validators, holder) against what DDP (a ring all-reduce every step) moves per worker,
the weights on chain, and the path of the run page. Ctrl-C stops every process.

    python scripts/demo.py                          # 3 miners, 2 validators, 8 rounds, tiny
    python scripts/demo.py --miners 5 --rounds 20 --preset small

Before starting the neurons it times a few inner steps on this machine (under its current load)
and sizes the window so a miner's steps fit its upload phase with headroom; --window-blocks N
overrides that. While it runs, the pacemaker lengthens the chain's blocks whenever the work it
measures (each neuron's steps) needs more time than a window gives, and prints why
(`pacemaker: blocks stretched from 0.50 s to 0.81 s (validator1 score took ...)`). If the run
stops short it says why in one line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from subnet.cli import ArgParser, run_guarded
from subnet.data import TokenDataset
from subnet.localnet.calibrate import Calibration, calibrate
from subnet.localnet.diagnose import stall_reason
from subnet.localnet.run import LocalRun, NeuronsExited, RunSettings
from subnet.logs import setup_logging
from subnet.monitor.report import traffic
from subnet.monitor.report.load import load_run
from subnet.monitor.report.units import fmt_bytes

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = ArgParser(description=__doc__.split("\n")[0])
    parser.add_argument("--miners", type=int, default=3, help="miner processes")
    parser.add_argument("--validators", type=int, default=2, help="validator processes")
    parser.add_argument("--rounds", type=int, default=8, help="merged model versions to run")
    parser.add_argument(
        "--preset", default="tiny", help="model preset: tiny, small, hypertrain-20m"
    )
    parser.add_argument("--block-time", type=float, default=0.5, help="simnet seconds per block")
    parser.add_argument(
        "--window-blocks", type=int, default=None,
        help="blocks per window (default: calibrated from a measured inner step, at least 20)",
    )  # fmt: skip
    parser.add_argument(
        "--headroom", type=float, default=1.5,
        help="calibrated window: phases' measured needs times this (more where the load varies)",
    )  # fmt: skip
    parser.add_argument("--run-dir", default=None, help="default: runs/demo-<time>")
    parser.add_argument("--wandb", default="offline", choices=["offline", "online", "disabled"],
                        help="W&B mode of every neuron (offline runs land in the run folder)")  # fmt: skip
    args = parser.parse_args()
    setup_logging(node="demo")

    settings = RunSettings(
        miners=args.miners, validators=args.validators, rounds=args.rounds, preset=args.preset,
        block_time=args.block_time, wandb=args.wandb, data_dir=str(ROOT / "data"),
    )  # fmt: skip
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_data.py"), "--out",
         str(ROOT / "data" / settings.dataset)], check=True,
    )  # fmt: skip
    if not args.window_blocks:
        print(
            "measuring this machine (one inner step, one evaluation) to size the windows ...",
            flush=True,
        )
    if args.window_blocks:
        settings.window_blocks = args.window_blocks
    else:
        cal = calibrated_window(settings, args.headroom)
        settings.window_blocks = cal.window_blocks
        settings.upload_deadline, settings.report_deadline = (
            cal.upload_deadline,
            cal.report_deadline,
        )
        settings.reveal_deadline = cal.reveal_deadline
    window_s = settings.window_blocks * settings.block_time
    # Start-up (stack, processes, the first model) about a minute; a window or two before the
    # first merge (probation: a miner counts once a validator's check of it passed); the rounds.
    expected_min = (60 + (args.rounds + 3) * window_s) / 60
    print(
        f"expected: about {expected_min:.0f} minutes here ({args.rounds} rounds of "
        f"{window_s:.0f} s windows after about a minute of start-up; longer if the machine "
        "gets busier); a progress line every 15 s",
        flush=True,
    )
    run_dir = Path(args.run_dir or ROOT / "runs" / time.strftime("demo-%Y%m%d-%H%M%S"))
    run = LocalRun(run_dir, settings)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    first_loss = None
    try:
        print(
            f"starting simnet, the S3 server, the model holder, {args.validators} validators "
            f"and {args.miners} miners ...",
            flush=True,
        )
        run.start()
        print(
            f"\nrun folder: {run_dir}\n{'round':>5} {'window':>6} {'miners':>6} "
            f"{'held-out loss':>13} {'grads merged':>12} {'DDP worker, up+down':>20}"
        )

        explained = False

        def show(v: dict) -> None:
            nonlocal first_loss, explained
            first_loss = v["heldout_loss"] if first_loss is None else first_loss
            sent, ring = v.get("bytes"), v.get("ddp_ring_bytes_per_worker")
            ddp = 2 * ring if ring else None  # one DDP worker's ring, both ways
            merged = len(v.get("contributors", {}))
            print(
                f"{v['version']:>5} {v['window']:>6} {merged:>6} "
                f"{v['heldout_loss']:>13.4f} {fmt_bytes(sent) if sent else '-':>12} "
                f"{fmt_bytes(ddp) if ddp else '-':>20}",
                flush=True,
            )
            if 0 < v["version"] and merged < args.miners and not explained:
                explained = True
                print(
                    f"      ({merged} of {args.miners} miners merged: a miner counts once a "
                    "validator's check of it passed (probation), or sat out a window it could "
                    "not train in time; the run page names each one's reason)",
                    flush=True,
                )

        started = time.monotonic()
        # In windows of the chain's clock: the pacemaker may lengthen them on a busy machine.
        finished = run.wait(
            show, windows=3 * args.rounds + 4, on_progress=lambda line: print(line, flush=True)
        )
        elapsed = time.monotonic() - started
        graph = run.chain().metagraph()
    except KeyboardInterrupt:
        print("\ninterrupted; stopping every process")
        run.stop()
        return 130
    except NeuronsExited as error:
        run.stop()
        print(f"error: {error}", file=sys.stderr)
        return 1
    except BaseException:
        run.stop()
        raise
    codes = run.stop()
    versions = [v for v in run.versions() if v["version"] > 0]
    names = {w.hotkey: w.name for w in run.stack.endpoints.wallets}
    # The chain's view for the run page (incentive, dividends), as it was when the run ended.
    (run_dir / "chain.json").write_text(json.dumps({
        n.hotkey: {"uid": n.uid, "incentive": float(n.incentive), "dividends": float(n.dividends)}
        for n in graph.neurons
    }, indent=2))  # fmt: skip
    print(f"\nweights on chain (incentive after the last epoch, block {graph.block}):")
    for n in graph.neurons:
        if n.incentive > 0 or n.dividends > 0:
            print(f"  {names.get(n.hotkey, n.hotkey[:8]):<12} incentive {n.incentive:.3f}  "
                  f"dividends {n.dividends:.3f}")  # fmt: skip
    if versions:
        tokens = sum(v["tokens"] for v in versions)
        print(f"\n{len(versions)} rounds: held-out loss {first_loss:.4f} -> "
              f"{versions[-1]['heldout_loss']:.4f}; {tokens:,} tokens merged; "
              f"{traffic.describe(load_run(run_dir), fmt_bytes)}")  # fmt: skip
    report = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "report.py"), str(run_dir)],
        capture_output=True, text=True,
    )  # fmt: skip
    print(
        f"run page: {report.stdout.strip().splitlines()[-1] if report.returncode == 0 else 'unavailable: ' + report.stderr.strip()[-200:]}"
    )
    bad = {name: code for name, code in codes.items() if code != 0}
    if not finished:
        print(stall_reason(run_dir, args.rounds, elapsed))
    print("all processes stopped" + (f" (non-zero exit codes: {bad})" if bad else ""))
    return 0 if finished and not bad else 1


def calibrated_window(settings: RunSettings, headroom: float = 1.5) -> Calibration:
    """The window and deadlines that fit this machine now (see subnet/localnet/calibrate.py)."""
    vocab = TokenDataset.from_folder(Path(settings.data_dir) / settings.dataset, 64).vocab_size
    cal = calibrate(settings.preset, vocab, settings.inner_steps, settings.block_time,
                    settings.miners, validators=settings.validators, headroom=headroom)  # fmt: skip
    print(cal.describe(settings.block_time), flush=True)
    return cal


if __name__ == "__main__":
    sys.exit(run_guarded(main))
