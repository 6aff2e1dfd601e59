"""A separate OS process that registers a dev wallet on a simnet and commits a string."""

from __future__ import annotations

import sys

from subnet.chain import ChainClient, build_subtensor
from subnet.localnet.wallets import dev_wallet

if __name__ == "__main__":
    network, wallet_dir, name = sys.argv[1:4]
    chain = ChainClient(build_subtensor(network), 3)
    wallet = dev_wallet(wallet_dir, name)
    uid = chain.register(wallet)
    chain.commit(wallet, f"hello from {name}")
    # each process sees the other's writes on the shared chain
    print(uid, sorted(chain.commitments().values()))
