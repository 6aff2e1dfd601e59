"""A room's address: one string that says where the room lives, as a person types it.

    http://127.0.0.1:5000/beam-owner/lab     an S3-compatible server (path style), bucket, room
    https://ACCOUNT.r2.cloudflarestorage.com/bucket/lab
    s3://bucket/lab                          AWS S3 (region from --storage.region)

Credentials for the room's prefix come from ``BEAM_ROOM_ACCESS_KEY_ID`` /
``BEAM_ROOM_SECRET_ACCESS_KEY`` when set, else from the node's own storage keys
(``BEAM_S3_ACCESS_KEY_ID`` ...). Members need read access to ``rooms/<room>/``; joiners also
write their redemption under ``rooms/<room>/redemptions/`` and members their leave under
``rooms/<room>/leaves/`` (see docs/rooms.md for a bucket policy).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..config import ConfigError
from ..storage.commitment import encode_commitment, own_read_settings
from ..storage.config import CredentialSource, StorageConfig, require_bucket
from ..storage.s3 import S3Store
from .errors import RoomError
from .manifest import NAME
from .store import RoomStore

ROOM_KEY_ENV = "BEAM_ROOM_ACCESS_KEY_ID"
ROOM_SECRET_ENV = "BEAM_ROOM_SECRET_ACCESS_KEY"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
EXAMPLE = "http://127.0.0.1:5000/BUCKET/ROOM or s3://BUCKET/ROOM"


@dataclass(frozen=True)
class RoomAddress:
    """Where a room lives."""

    endpoint_url: str | None  # None: AWS S3
    bucket: str
    room: str
    region: str = "us-east-1"

    def __str__(self) -> str:
        base = self.endpoint_url.rstrip("/") if self.endpoint_url else "s3:/"
        return f"{base}/{self.bucket}/{self.room}"

    @property
    def local(self) -> bool:
        """Whether the endpoint is on this machine (readers may then use private addresses)."""
        host = urlsplit(self.endpoint_url or "").hostname or ""
        return host in ("127.0.0.1", "localhost", "::1")

    def storage(self, environ: dict[str, str] | None = None) -> StorageConfig:
        """Storage settings of the room's bucket."""
        env = os.environ if environ is None else environ
        creds = CredentialSource()
        if env.get(ROOM_KEY_ENV):
            creds = CredentialSource(
                access_key_id_env=ROOM_KEY_ENV, secret_access_key_env=ROOM_SECRET_ENV
            )
        return StorageConfig(
            bucket=self.bucket,
            endpoint_url=self.endpoint_url,
            region=self.region,
            addressing_style="path" if self.endpoint_url else "auto",
            credentials=creds,
            max_attempts=3,
        )

    def open(self, environ: dict[str, str] | None = None) -> RoomStore:
        """The room's objects, over S3."""
        return RoomStore(S3Store.from_config(self.storage(environ), environ), self.room)


def parse_address(text: str, region: str = "us-east-1") -> RoomAddress:
    """Parse a room address; RoomError("bad_request") with an example when it is not one."""
    parts = urlsplit(text.strip())
    path = [p for p in parts.path.split("/") if p]
    if parts.scheme == "s3":
        path = [parts.netloc, *path]
        endpoint = None
    elif parts.scheme in ("http", "https") and parts.netloc and "@" not in parts.netloc:
        endpoint = f"{parts.scheme}://{parts.netloc}"
    else:
        raise RoomError("bad_request", f"--room {text!r} is not a room address; use {EXAMPLE}")
    if len(path) != 2 or not _BUCKET.fullmatch(path[0]) or not re.fullmatch(NAME, path[1]):
        raise RoomError(
            "bad_request",
            f"--room {text!r} must end in /BUCKET/ROOM (room names: a-z 0-9 . _ -); e.g. {EXAMPLE}",
        )
    return RoomAddress(endpoint, path[0], path[1], region)


def own_read(storage: StorageConfig | None) -> str:
    """How members read this node's bucket (the read-only key pair from the environment)."""
    storage = require_bucket(storage)
    try:
        return encode_commitment(own_read_settings(storage))
    except ValueError as error:
        raise ConfigError(str(error)) from None
