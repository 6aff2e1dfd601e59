"""The chain layer: bittensor 11 SDK access for every network, plus simnet for local runs."""

from .client import ChainClient, WeightsOutcome
from .commitments import from_fields, to_fields
from .errors import ChainSetupError, ChainUnavailable, NotRegistered, WalletError
from .network import build_subtensor, connect
from .wallets import load_wallet

__all__ = [
    "ChainClient",
    "WeightsOutcome",
    "ChainSetupError",
    "ChainUnavailable",
    "NotRegistered",
    "WalletError",
    "build_subtensor",
    "connect",
    "load_wallet",
    "from_fields",
    "to_fields",
]
