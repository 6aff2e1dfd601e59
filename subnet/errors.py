"""Errors shared across layers (the chain, storage and neuron layers each refine them)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says what is wrong and how to fix it."""


class SetupError(RuntimeError):
    """The node cannot run as configured; the message is one line saying how to fix it."""


class NotReady(SetupError):
    """Something a neuron needs before its first window is not there yet (it waits and retries)."""
