"""Set up Beam on the official subtensor localnet Docker image (for users with Docker).

    python scripts/localnet_docker.py              # docker run + fund + subnet + register + stake
    python scripts/localnet_docker.py --no-docker  # the chain is already running on :9944
    python scripts/localnet_docker.py --image ghcr.io/raofoundation/subtensor-localnet:sha-<commit>

Steps: start the image (``IMAGE`` by default; pin an immutable ``:sha-<commit>`` tag with
``--image``); wait for the chain, saying so every few seconds; measure its block time; fund
Beam's development wallets from Alice; create a subnet owned by ``owner`` and start it;
register the validators, miners and the model holder; stake the validators. Afterwards neurons
take ``--subtensor.network local --netuid <printed netuid>``. Every failure is one ``error:``
line with what to do. Not run in CI (no Docker engine there); see docs/localnet-docker.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from subnet.cli import run_guarded
from subnet.errors import SetupError

# The official localnet image moved to the Rao Foundation's registry. ``devnet`` follows the
# devnet branch; its immutable ``:sha-<commit>`` tags pin one build (see the doc).
IMAGE = "ghcr.io/raofoundation/subtensor-localnet:devnet"
CONTAINER = "beam-localnet"
ENDPOINT = "ws://127.0.0.1:9944"


@dataclass
class Alice:
    """The localnet's pre-funded development account, wallet-shaped for the SDK."""

    coldkey: Any
    coldkeypub: Any
    hotkey: Any


def start_container(image: str) -> None:
    """``docker run`` the chain; SetupError with the fix when Docker cannot."""
    if shutil.which("docker") is None:
        raise SetupError(
            "docker is not installed (or not on PATH); install Docker, or start a "
            f"subtensor node on {ENDPOINT} yourself and pass --no-docker"
        )
    args = [
        "docker",
        "run",
        "-d",
        "--rm",
        "--name",
        CONTAINER,
        "-p",
        "9944:9944",
        "-p",
        "9945:9945",
        image,
    ]
    print(f"starting {image} as container {CONTAINER} (the first pull takes a while)", flush=True)
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode == 0:
        return
    lines = [x.strip() for x in done.stderr.splitlines() if x.strip()]
    why = next((x for x in lines if not x.startswith("Run 'docker")), "no output")
    why = why.removeprefix("docker: ")
    if "Cannot connect to the Docker daemon" in why or "docker daemon" in why.lower():
        raise SetupError(
            f"Docker is installed but its daemon is not running ({why}); start it "
            "(e.g. `sudo systemctl start docker`) and run this again"
        )
    if "already in use" in why:
        raise SetupError(
            f"a container named {CONTAINER} exists already; stop it with "
            f"`docker stop {CONTAINER}`, or use it with --no-docker"
        )
    raise SetupError(f"`docker run {image}` failed: {why}")


def wait_for_chain(seconds: float, every: float = 10.0):
    """Connect to the localnet, printing a line every ``every`` seconds while it is not up."""
    from subnet.chain import ChainUnavailable, connect

    started = time.monotonic()
    said = started
    while True:
        try:
            return connect("local", timeout=10)
        except ChainUnavailable:
            waited = time.monotonic() - started
            if waited > seconds:
                raise SetupError(
                    f"no chain answered at {ENDPOINT} within {seconds:.0f} s; "
                    f"`docker logs {CONTAINER}` says why (or start the node, for "
                    "--no-docker)"
                ) from None
            if time.monotonic() - said >= every:
                print(
                    f"waiting for the chain at {ENDPOINT}: {waited:.0f} s of {seconds:.0f} s",
                    flush=True,
                )
                said = time.monotonic()
            time.sleep(2)


def block_time(sub, seconds: float = 6.0) -> float | None:
    """Seconds per block, measured over ``seconds`` (None when no block came)."""
    first, started = int(sub.block), time.monotonic()
    time.sleep(seconds)
    made = int(sub.block) - first
    return (time.monotonic() - started) / made if made > 0 else None


def _checked(result, what: str) -> Any:
    """The result of an extrinsic, or SetupError naming what failed."""
    try:
        result.raise_for_failure()
    except Exception as error:  # noqa: BLE001 - the SDK's failure types vary; one line each
        raise SetupError(f"{what} failed on the localnet: {str(error).splitlines()[0]}") from None
    return result


def setup(args: argparse.Namespace) -> int:
    """Fund, create and start the subnet, register and stake; prints what the neurons need."""
    import bittensor as bt
    from bittensor.sp_core import Keypair

    from subnet.chain import ChainClient
    from subnet.localnet.wallets import dev_wallet, roster

    if not args.no_docker:
        start_container(args.image)
    sub = wait_for_chain(args.wait)
    seconds = block_time(sub)
    print(
        f"chain up at {ENDPOINT}: a block every {seconds:.2f} s"
        if seconds
        else f"chain up at {ENDPOINT}, but no new block in 6 s",
        flush=True,
    )
    alice_key = Keypair.create_from_uri("//Alice")
    alice = Alice(alice_key, alice_key, alice_key)
    wallets = {n: dev_wallet(args.wallet_path, n) for n, _ in roster(args.validators, args.miners)}
    for name, wallet in wallets.items():
        intent = bt.Transfer(dest_ss58=wallet.coldkeypub.ss58_address, amount_tao=args.fund_tao)
        _checked(sub.execute(intent, alice), f"funding {name} from Alice")
        print(f"funded {name} with {args.fund_tao} TAO from Alice")
    owner = wallets["owner"]
    result = _checked(
        sub.execute(bt.RegisterSubnet(hotkey_ss58=owner.hotkey.ss58_address), owner),
        "creating the subnet",
    )
    netuid = int(result.data.get("netuid") or max(s.netuid for s in sub.subnets.subnets()))
    _checked(sub.execute(bt.StartCall(netuid=netuid), owner), f"starting netuid {netuid}")
    print(f"created and started netuid {netuid}")
    chain = ChainClient(sub, netuid)
    for name, role in roster(args.validators, args.miners):
        if role == "owner":
            continue
        uid = chain.register(wallets[name])
        print(f"registered {name} as uid {uid}")
        if role == "validator":
            stake = bt.AddStake(
                hotkey_ss58=wallets[name].hotkey.ss58_address,
                netuid=netuid,
                amount_tao=args.stake_tao,
            )
            _checked(sub.execute(stake, wallets[name]), f"staking {name}")
    names = ", ".join(n for n in wallets if n != "owner")
    print(
        f"\nready: --subtensor.network local --netuid {netuid} --wallet.path "
        f"{args.wallet_path} --wallet.name NAME (one of {names}); docs/localnet-docker.md "
        "has the neuron commands"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-docker", action="store_true", help="the chain runs already on :9944")
    parser.add_argument("--image", default=IMAGE, help="the localnet image (pin a :sha-<commit>)")
    parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for the chain")
    parser.add_argument("--wallet-path", default=".beam/localnet-docker/wallets")
    parser.add_argument("--validators", type=int, default=2)
    parser.add_argument("--miners", type=int, default=3)
    parser.add_argument("--fund-tao", type=float, default=1000.0)
    parser.add_argument("--stake-tao", type=float, default=100.0)
    args = parser.parse_args()
    return run_guarded(lambda: setup(args))


if __name__ == "__main__":
    sys.exit(main())
