"""`make demo`: bring up the local subnet, show its metagraph, and shut down cleanly.

The end-to-end training demo (miners, validators and the model holder on this stack) builds on
this; for now it proves the chain, the storage server and the registrations work together.
"""

from __future__ import annotations

import sys
import tempfile

from subnet.chain import ChainClient, build_subtensor
from subnet.chain.render import format_metagraph
from subnet.localnet import LocalStack, StackSettings
from subnet.logs import setup_logging


def main() -> int:
    setup_logging(node="demo")
    with tempfile.TemporaryDirectory(prefix="beam-demo-") as root:
        with LocalStack(root, StackSettings(block_time=0.5)) as stack:
            ep = stack.endpoints
            chain = ChainClient(build_subtensor(ep.network), ep.netuid)
            names = {w.hotkey: w.name for w in ep.wallets}
            start = chain.block()
            chain.wait_for_block(start + 2, timeout=30)
            print(format_metagraph(chain.metagraph(), names))
            print(
                f"\nsimnet {ep.network}, S3 {ep.s3_endpoint}; blocks advanced {start} -> "
                f"{chain.block()}"
            )
    print("local stack stopped cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
