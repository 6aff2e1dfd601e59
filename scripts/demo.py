"""`make demo`: bring up the local subnet, show it working, and shut down cleanly.

Starts simnet and the S3 server, registers and stakes the development wallets, lets each
validator set weights on chain through the real SDK (``bt.SetWeights``), waits for the epoch and
prints the metagraph with the incentive and dividends it produced. The end-to-end training round
(miners, validators scoring uploads, the model holder) builds on this stack.
"""

from __future__ import annotations

import sys
import tempfile

from subnet.chain import ChainClient, build_subtensor, load_wallet
from subnet.chain.render import format_metagraph
from subnet.config import WalletConfig
from subnet.localnet import LocalStack, StackSettings
from subnet.logs import setup_logging

# Example weights for the demo only: the validators here score nothing yet.
EXAMPLE_WEIGHTS = {"miner1": 0.2, "miner2": 0.3, "miner3": 0.5}


def main() -> int:
    setup_logging(node="demo")
    with tempfile.TemporaryDirectory(prefix="beam-demo-") as root:
        with LocalStack(root, StackSettings(block_time=0.25)) as stack:
            ep = stack.endpoints
            chain = ChainClient(build_subtensor(ep.network), ep.netuid)
            names = {w.hotkey: w.name for w in ep.wallets}
            print(format_metagraph(chain.metagraph(), names), "\n")
            uid = {name: chain.uid_of(hotkey) for hotkey, name in names.items()}
            weights = {uid[name]: w for name, w in EXAMPLE_WEIGHTS.items()}
            for v in (w for w in ep.wallets if w.role == "validator"):
                wallet = load_wallet(WalletConfig(name=v.name, path=ep.wallet_path))
                outcome = chain.set_weights(wallet, weights)
                print(f"{v.name} set weights {EXAMPLE_WEIGHTS}: {outcome.reason}")
            graph = chain.metagraph()
            next_epoch = graph.last_step + graph.tempo + 1
            print(f"waiting for the epoch at block {next_epoch} ...\n")
            chain.wait_for_block(next_epoch, timeout=120)
            print(format_metagraph(chain.metagraph(), names))
            print(f"\nsimnet {ep.network}, S3 {ep.s3_endpoint}")
    print("local stack stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
