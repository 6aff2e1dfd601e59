"""Where scores end up: the ``WeightSink`` seam (chain weights, a signed object, or none).

``ChainWeights`` lives in :mod:`subnet.weights.chain` (it imports the chain layer).
"""

from .base import NoWeights, SignedWeights, WeightSink, WeightsSet

__all__ = ["NoWeights", "SignedWeights", "WeightSink", "WeightsSet"]
