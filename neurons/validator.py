"""Beam validator: score every upload, publish signed score reports, set weights each tempo.

    python neurons/validator.py --netuid 3 --wallet.name v1 --wallet.hotkey default \
        --subtensor.network sim://127.0.0.1:9945 --storage.bucket my-bucket \
        --storage.endpoint_url http://127.0.0.1:5000 --config protocol.toml

See docs/validator.md.
"""

import sys

from subnet.node.entry import run_role

if __name__ == "__main__":
    sys.exit(run_role("validator", __doc__.split("\n")[0]))
