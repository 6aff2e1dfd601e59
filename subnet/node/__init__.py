"""Subnet mode: the chain-backed runtime (block clock, chain membership, chain weights), the
subnet's run plan, and the ``run_role`` main of the entry points in ``neurons/``."""
