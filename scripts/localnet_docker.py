"""Set up Beam on the official subtensor localnet Docker image (for users with Docker).

    python scripts/localnet_docker.py            # docker run + fund + subnet + register + stake
    python scripts/localnet_docker.py --no-docker  # the chain is already running on :9944

Steps: start ``ghcr.io/opentensor/subtensor-localnet:devnet-ready``; fund Beam's development
wallets from Alice; create a subnet owned by ``owner`` and start it; register the validators,
miners and the model holder; stake the validators. Afterwards neurons take
``--subtensor.network local --netuid <printed netuid>``. Not run in CI (no Docker engine there);
see docs/localnet-docker.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass

import bittensor as bt
from bittensor.sp_core import Keypair

from subnet.chain import ChainClient, ChainUnavailable, connect
from subnet.localnet.wallets import dev_wallet, roster

IMAGE = "ghcr.io/opentensor/subtensor-localnet:devnet-ready"


@dataclass
class Alice:
    """The localnet's pre-funded development account, wallet-shaped for the SDK."""

    coldkey: Keypair
    coldkeypub: Keypair
    hotkey: Keypair


def wait_for_chain(network: str, seconds: float) -> bt.Subtensor:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return connect(network, timeout=10)
        except ChainUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-docker", action="store_true", help="chain already running")
    parser.add_argument("--wallet-path", default=".beam/localnet-docker/wallets")
    parser.add_argument("--validators", type=int, default=2)
    parser.add_argument("--miners", type=int, default=3)
    parser.add_argument("--fund-tao", type=float, default=1000.0)
    parser.add_argument("--stake-tao", type=float, default=100.0)
    args = parser.parse_args()

    if not args.no_docker:
        subprocess.run(
            ["docker", "run", "-d", "--rm", "--name", "beam-localnet",
             "-p", "9944:9944", "-p", "9945:9945", IMAGE],
            check=True,
        )  # fmt: skip
    sub = wait_for_chain("local", 120)
    alice_key = Keypair.create_from_uri("//Alice")
    alice = Alice(alice_key, alice_key, alice_key)

    wallets = {n: dev_wallet(args.wallet_path, n) for n, _ in roster(args.validators, args.miners)}
    for name, wallet in wallets.items():
        intent = bt.Transfer(dest_ss58=wallet.coldkeypub.ss58_address, amount_tao=args.fund_tao)
        sub.execute(intent, alice).raise_for_failure()
        print(f"funded {name} with {args.fund_tao} TAO from Alice")

    owner = wallets["owner"]
    result = sub.execute(bt.RegisterSubnet(hotkey_ss58=owner.hotkey.ss58_address), owner)
    result.raise_for_failure()
    netuid = int(result.data.get("netuid") or max(s.netuid for s in sub.subnets.subnets()))
    sub.execute(bt.StartCall(netuid=netuid), owner).raise_for_failure()
    print(f"created and started netuid {netuid}")

    chain = ChainClient(sub, netuid)
    for name, role in roster(args.validators, args.miners):
        if role == "owner":
            continue
        uid = chain.register(wallets[name])
        print(f"registered {name} as uid {uid}")
        if role == "validator":
            stake = bt.AddStake(
                hotkey_ss58=wallets[name].hotkey.ss58_address, netuid=netuid,
                amount_tao=args.stake_tao,
            )  # fmt: skip
            sub.execute(stake, wallets[name]).raise_for_failure()
    print(f"\nready: --subtensor.network local --netuid {netuid} --wallet.path {args.wallet_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
