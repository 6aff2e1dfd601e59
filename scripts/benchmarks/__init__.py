"""One module per benchmark of ``scripts/bench.py``; each exposes ``add_arguments`` and ``run``."""
