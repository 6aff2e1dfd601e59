"""Monitoring: structured metrics per neuron (jsonl); W&B and the run page build on them."""

from .metrics import MetricsSink

__all__ = ["MetricsSink"]
