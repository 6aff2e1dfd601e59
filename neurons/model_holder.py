"""Beam model holder: merge each window by the validators' median scores, publish the next model.

    python neurons/model_holder.py --netuid 3 --wallet.name holder --wallet.hotkey default \
        --subtensor.network sim://127.0.0.1:9945 --storage.bucket holder-bucket \
        --storage.endpoint_url http://127.0.0.1:5000 --data.dir data --config protocol.toml

See docs/model_holder.md.
"""

import sys

from subnet.node.entry import run_role

if __name__ == "__main__":
    sys.exit(run_role("holder", __doc__.split("\n")[0]))
