"""Run simnet: ``python -m subnet.chain.simnet --port 9945 --db .beam/simnet.db``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from loguru import logger

from .server import SimnetServer


def main(argv: list[str] | None = None) -> int:
    """Serve a simnet chain until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="beam-simnet",
        description="Local chain for Beam that the real bittensor SDK talks to.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, default=9945, help="TCP port (0 picks a free one)")
    parser.add_argument("--db", default=".beam/simnet.db", help="SQLite state file")
    parser.add_argument(
        "--block-time", type=float, default=1.0, help="seconds per block; 0 = manual stepping"
    )
    parser.add_argument("--port-file", default=None, help="write the bound port here")
    args = parser.parse_args(argv)

    from pathlib import Path

    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    try:
        server = SimnetServer(args.db, args.host, args.port, args.block_time)
    except (OSError, ValueError) as error:
        print(f"simnet: cannot start on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2
    if args.port_file:
        Path(args.port_file).write_text(str(server.server_address[1]))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.start_blocks()
    logger.info(
        "simnet serving {} (db {}, block {})", server.url, args.db, server.chain.state.block
    )
    stop.wait()
    server.close()
    logger.info("simnet stopped at block {}", server.chain.state.block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
