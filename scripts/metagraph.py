"""Print a subnet's metagraph (uids, hotkeys, stake, permits, incentive, commitments).

python scripts/metagraph.py --netuid 3 --subtensor.network sim://127.0.0.1:9945
python scripts/metagraph.py --netuid 3 --wallet.name miner1 --check-registration
"""

from __future__ import annotations

import sys

from subnet.chain import ChainClient, load_wallet
from subnet.chain.render import format_metagraph
from subnet.cli import build_parser, resolve, run_guarded
from subnet.logs import setup_logging


def main() -> int:
    parser = build_parser("metagraph", __doc__.split("\n")[0], role="chain")
    parser.add_argument(
        "--check-registration", action="store_true", help="also check the wallet's hotkey"
    )
    args = parser.parse_args()
    node = resolve(args).node
    setup_logging(debug=node.logging.debug, trace=node.logging.trace, node="metagraph")
    chain = ChainClient.open(node.subtensor.network, node.netuid)
    print(format_metagraph(chain.metagraph()))
    if args.check_registration:
        hotkey = load_wallet(node.wallet).hotkey.ss58_address
        print(
            f"\n{node.wallet.name}/{node.wallet.hotkey} is uid {chain.require_registered(hotkey)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
