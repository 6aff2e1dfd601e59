"""Bring up the local stack (simnet + S3 server + registered dev wallets) and keep it running.

    python scripts/localnet.py                 # until Ctrl-C
    python scripts/localnet.py --exit-after 0  # start, print the metagraph, stop

Neurons started by hand read ``.beam/localnet/endpoints.json`` (or take the printed flags).
A second copy on the same --root refuses to start while the first runs (``localnet.lock``).
"""

from __future__ import annotations

import signal
import sys
import threading

from subnet.chain import ChainClient, build_subtensor
from subnet.chain.render import format_metagraph
from subnet.cli import ArgParser, run_guarded
from subnet.localnet import LocalStack, StackRunning, StackSettings
from subnet.logs import setup_logging


def main() -> int:
    parser = ArgParser(description=__doc__.split("\n")[1])
    parser.add_argument("--root", default=".beam/localnet", help="state, wallets and logs")
    parser.add_argument("--validators", type=int, default=2, help="validator wallets to register")
    parser.add_argument("--miners", type=int, default=3, help="miner wallets to register")
    parser.add_argument("--block-time", type=float, default=1.0, help="seconds per block")
    parser.add_argument(
        "--exit-after", type=float, default=None, help="stop after this many seconds"
    )
    args = parser.parse_args()
    setup_logging(node="localnet")
    settings = StackSettings(
        n_validators=args.validators, n_miners=args.miners, block_time=args.block_time
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stack = LocalStack(args.root, settings)
    try:
        stack.start()
    except StackRunning as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        ep = stack.endpoints
        names = {w.hotkey: w.name for w in ep.wallets}
        graph = ChainClient(build_subtensor(ep.network), ep.netuid).metagraph()
        print(format_metagraph(graph, names))
        print(f"\nchain:   --subtensor.network {ep.network} --netuid {ep.netuid}")
        print(f"wallets: --wallet.path {ep.wallet_path} --wallet.name miner1")
        print(f"s3:      {ep.s3_endpoint}   endpoints file: {args.root}/endpoints.json")
        if args.exit_after is None:
            print("\nlocal stack running; Ctrl-C stops it")
        stop.wait(args.exit_after)
    finally:
        stack.stop()
    print("local stack stopped")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
