"""Object storage: Beam's data plane.

`ObjectStore` is the protocol every backend implements; `S3Store` (in `subnet.storage.s3`, the only
module importing boto3) is the real one, `MemoryStore` the in-process one for unit tests. `keys`
names every object; `commitment` encodes read settings for the chain; `readers` builds a reader per
hotkey; `local_server` runs a real S3 server (moto) for tests and the local demo.

This package's `__init__` imports nothing heavy: import `subnet.storage.s3` to get boto3.
"""

from subnet.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    ObjectTooLarge,
    StorageError,
    StorageReason,
)
from subnet.storage.commitment import ReadSettings, decode_commitment, encode_commitment
from subnet.storage.config import CredentialSource, StorageConfig
from subnet.storage.memory import MemoryStore

__all__ = [
    "CredentialSource",
    "MemoryStore",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "ObjectTooLarge",
    "ReadSettings",
    "StorageConfig",
    "StorageError",
    "StorageReason",
    "decode_commitment",
    "encode_commitment",
]
