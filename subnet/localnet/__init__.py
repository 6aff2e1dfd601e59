"""The local stack: simnet, a real S3 server and development wallets, started and stopped together."""

from .lock import StackRunning
from .stack import Endpoints, LocalStack, StackSettings, read_endpoints

__all__ = ["Endpoints", "LocalStack", "StackRunning", "StackSettings", "read_endpoints"]
