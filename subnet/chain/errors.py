"""Errors of the chain layer. Each message is one line saying what is wrong and how to fix it."""

from __future__ import annotations

from ..errors import SetupError


class ChainSetupError(SetupError):
    """The node cannot talk to the chain as configured (network, wallet, netuid ...)."""


class ChainUnavailable(ChainSetupError):
    """Nothing answered at the configured chain endpoint."""


class WalletError(ChainSetupError):
    """A wallet is missing, or locked with no way to unlock it here."""


class NotRegistered(ChainSetupError):
    """The hotkey holds no uid on the subnet."""
