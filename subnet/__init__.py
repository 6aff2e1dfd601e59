"""Beam: train one language model with many untrusted machines over the open internet."""

__version__ = "0.1.0"
