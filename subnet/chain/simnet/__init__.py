"""simnet: a local chain the real bittensor SDK talks to through its ``substrate=`` seam.

Run it with ``python -m subnet.chain.simnet`` (or ``beam-simnet``); neurons reach it with
``--subtensor.network sim://127.0.0.1:PORT``. See ``docs/simnet.md``.
"""

from .chain import SimChain
from .server import SimnetServer
from .substrate import SimnetError, SimSubstrate, post

__all__ = ["SimChain", "SimnetServer", "SimSubstrate", "SimnetError", "post"]
