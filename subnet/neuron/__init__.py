"""Neurons: ``BaseNeuron`` owns the one loop; Miner, Validator and ModelHolder supply steps."""
