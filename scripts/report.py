"""Write a Beam run's page: ``python scripts/report.py RUN_DIR [--out PATH] [--serve] [--port N]``.

Reads RUN_DIR/run.json and each neuron's metrics.jsonl (RUN_DIR/state/*/ for a local run; for
neurons started by hand, give their --neuron.state_dir, default .beam/state) and writes one
self-contained HTML file (default RUN_DIR/report.html), printing its path. With --serve it also
serves the page on http://127.0.0.1:PORT/, re-rendered on every request and auto-refreshing, until
Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import sys
from pathlib import Path

from subnet.cli import ArgParser, run_guarded
from subnet.logs import setup_logging
from subnet.monitor.report import load_run, make_server, metrics_files, render_page


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; see the module docstring."""
    parser = ArgParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run folder")
    parser.add_argument("--out", type=Path, help="where to write the page (RUN_DIR/report.html)")
    parser.add_argument("--serve", action="store_true", help="serve the page live on loopback")
    parser.add_argument("--port", type=int, default=8787, help="port for --serve (0: any free)")
    parser.add_argument("--refresh", type=int, default=5, help="--serve auto-refresh, seconds")
    parser.add_argument("--debug", action="store_true", help="log each --serve request")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Write the page; with --serve, serve it until interrupted."""
    args = parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"error: {args.run_dir} is not a folder", file=sys.stderr)
        return 2
    if not metrics_files(args.run_dir):
        where = f"{args.run_dir}/state/*/metrics.jsonl or {args.run_dir}/*/metrics.jsonl"
        if not args.serve:
            print(f"error: no metrics found ({where}); give a run folder or the neurons' "
                  "--neuron.state_dir (default .beam/state)", file=sys.stderr)  # fmt: skip
            return 2
        print(f"warning: no metrics yet ({where}); the page fills in as neurons log", flush=True)
    server = None
    if args.serve:
        try:
            server = make_server(args.run_dir, port=args.port, refresh=args.refresh)
        except OSError as error:
            busy = error.errno == errno.EADDRINUSE
            why = "is in use (another report server?)" if busy else f"cannot be used ({error})"
            print(f"error: port {args.port} {why}; pick another with --port N, or --port 0 "
                  "for any free port", file=sys.stderr)  # fmt: skip
            return 2
    out = args.out or args.run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(load_run(args.run_dir)), encoding="utf-8")
    print(out)
    if server is not None:
        setup_logging(debug=args.debug, node="report")  # request lines only with --debug
        print(f"serving {server.url} (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt), server:
            server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
