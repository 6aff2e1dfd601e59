"""Register a wallet's hotkey on a subnet by burning the registration cost (needs the coldkey).

    python scripts/register.py --netuid 3 --wallet.name m1 --wallet.hotkey default \
        --subtensor.network finney

On the local stack (simnet, where btcli cannot connect), ``--fund TAO`` first gives the coldkey
that much from simnet's faucet, so a wallet of your own can pay the burn:

    python scripts/register.py --subtensor.network sim://127.0.0.1:PORT --netuid 3 \
        --wallet.name me --wallet.hotkey default --fund 100

An encrypted coldkey is unlocked with BT_WALLET_PASSWORD or BT_WALLET_PASSWORD_FILE.
"""

from __future__ import annotations

import sys

from subnet.chain import ChainClient, ChainSetupError, load_wallet
from subnet.cli import build_parser, resolve, run_guarded
from subnet.config import ConfigError
from subnet.logs import setup_logging

RAO = 1_000_000_000


def main() -> int:
    parser = build_parser("register", __doc__.split("\n")[0], role="chain")
    parser.add_argument(
        "--fund", type=float, default=0.0, metavar="TAO",
        help="sim:// networks only: first fund the coldkey with this many TAO from simnet",
    )  # fmt: skip
    args = parser.parse_args()
    node = resolve(args).node
    setup_logging(debug=node.logging.debug, trace=node.logging.trace, node="register")
    network = node.subtensor.network
    if args.fund and not network.startswith("sim://"):
        raise ConfigError(
            "--fund works on simnet (sim://HOST:PORT) only; on a real chain use btcli"
        )
    wallet = load_wallet(node.wallet, coldkey=True)
    chain = ChainClient.open(network, node.netuid)
    if args.fund:
        from subnet.chain.simnet import post

        url = "http://" + network.removeprefix("sim://")
        post(url, "admin_fund", {"coldkey": wallet.coldkeypub.ss58_address,
                                 "rao": int(args.fund * RAO)})  # fmt: skip
    try:
        uid = chain.register(wallet)
    except ChainSetupError:
        raise
    except Exception as error:  # the chain refused the burn: say why, in one line
        hint = " (add --fund 100 on simnet)" if network.startswith("sim://") else ""
        raise ChainSetupError(f"registration refused: {error}{hint}") from None
    print(f"{wallet.hotkey.ss58_address} is uid {uid} on netuid {node.netuid}")
    return 0


if __name__ == "__main__":
    sys.exit(run_guarded(main))
