"""Neurons: ``BaseNeuron`` owns the one loop over clock ticks and runs the steps the compiled run
plan lists for its slot; Miner, Validator and ModelHolder supply the actions (``registry.py``)."""
