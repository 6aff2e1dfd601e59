"""Checks of training (protocol v6): what a miner commits to, what a check reads, and the pure
comparison between a miner's upload and a validator's replay of its window.

The neuron side (who checks whom, when, and what a failure costs) is in
``subnet.neuron.checks``; the design and its costs in docs/protocol.md.
"""
