"""Beam miner: train on assigned shards, upload a compressed, signed pseudo-gradient each window.

    python neurons/miner.py --netuid 3 --wallet.name m1 --wallet.hotkey default \
        --subtensor.network sim://127.0.0.1:9945 --storage.bucket my-bucket \
        --storage.endpoint_url http://127.0.0.1:5000 --config protocol.toml

Storage write keys come from BEAM_S3_ACCESS_KEY_ID / BEAM_S3_SECRET_ACCESS_KEY (or files); the
read-only pair published on chain from BEAM_S3_READ_ACCESS_KEY_ID / BEAM_S3_READ_SECRET_ACCESS_KEY.
See docs/miner.md.
"""

import sys

from subnet.node.entry import run_role

if __name__ == "__main__":
    sys.exit(run_role("miner", __doc__.split("\n")[0]))
