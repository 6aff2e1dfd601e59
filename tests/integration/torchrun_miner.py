"""``torchrun --standalone --nproc_per_node 2 neurons/miner.py ARGS``, as one script NeuronSet can start.

torchrun forwards SIGTERM to both ranks; rank 0 saves its state and tells rank 1 to stop.
"""

import sys
from pathlib import Path

from torch.distributed.run import main

if __name__ == "__main__":
    miner = str(Path(__file__).resolve().parents[2] / "neurons" / "miner.py")
    sys.exit(main(["--standalone", "--nproc_per_node", "2", miner, *sys.argv[1:]]))
