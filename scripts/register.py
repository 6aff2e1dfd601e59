"""Register a wallet's hotkey on a subnet by burning the registration cost (needs the coldkey).

    python scripts/register.py --netuid 3 --wallet.name m1 --wallet.hotkey default \
        --subtensor.network sim://127.0.0.1:9945

An encrypted coldkey is unlocked with BT_WALLET_PASSWORD or BT_WALLET_PASSWORD_FILE.
"""

from __future__ import annotations

import sys

from subnet.chain import ChainClient, load_wallet
from subnet.cli import parse_config, run_guarded
from subnet.logs import setup_logging


def main() -> int:
    node = parse_config(prog="register", description=__doc__.split("\n")[0]).node
    setup_logging(debug=node.logging.debug, trace=node.logging.trace, node="register")
    wallet = load_wallet(node.wallet, coldkey=True)
    chain = ChainClient.open(node.subtensor.network, node.netuid)
    uid = chain.register(wallet)
    print(f"{wallet.hotkey.ss58_address} is uid {uid} on netuid {node.netuid}")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
