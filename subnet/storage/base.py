"""The `ObjectStore` protocol Beam owns, and the typed errors every store raises.

Every backend (S3 and S3-compatible servers, the in-memory store for unit tests) implements the same
six calls. Errors are values: each `StorageError` carries a `reason` code plus the endpoint and
bucket it concerns, and never a secret.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

StorageReason = Literal[
    "not_found",  # the key does not exist
    "too_large",  # the object is larger than the caller's limit
    "bucket_not_found",  # the bucket does not exist at the endpoint
    "access_denied",  # wrong or missing credentials, or not allowed by policy
    "unreachable",  # the endpoint did not answer (DNS, refused, timeouts), retries exhausted
    "unavailable",  # the endpoint answered with server errors, retries exhausted
    "too_slow",  # the call ran past its deadline (a stalled or drip-feeding endpoint)
    "bad_response",  # the answer is not valid S3 (missing headers, redirect loop, garbage)
    "invalid_request",  # the store refused the request as malformed (a bug on our side)
    "credentials",  # credentials could not be loaded from their configured source
    "no_write_once",  # the store let a second conditional write (If-None-Match) replace a key
]


class StorageError(Exception):
    """A storage call failed. `reason` is a stable code; the message names endpoint and bucket."""

    def __init__(
        self,
        reason: StorageReason,
        *,
        endpoint: str,
        bucket: str,
        key: str | None = None,
        detail: str = "",
    ) -> None:
        self.reason: StorageReason = reason
        self.endpoint = endpoint
        self.bucket = bucket
        self.key = key
        self.detail = detail
        where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
        text = f"{reason}: {where} at {endpoint}"
        super().__init__(f"{text} ({detail})" if detail else text)


class ObjectNotFound(StorageError):
    """The key does not exist (distinct from every failure: absence is a normal outcome)."""


class ObjectTooLarge(StorageError):
    """The object exceeds the caller's size limit; its body was not downloaded."""


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or a head returns about one object."""

    key: str
    size: int  # bytes
    last_modified: datetime  # timezone-aware, as reported by the store
    etag: str = ""  # without quotes; md5 hex for single-part uploads on most stores


@runtime_checkable
class ObjectStore(Protocol):
    """A bucket (optionally under a key prefix) that Beam reads and writes objects in.

    Keys passed to every method are relative to the store's prefix. Implementations retry transient
    failures themselves and raise `StorageError` (or a subclass) once they give up.
    """

    @property
    def location(self) -> str:
        """A secret-free description of where this store points, for logs (`s3://bucket/prefix@endpoint`)."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write `data` under `key`, replacing any existing object."""
        ...

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write `data` only if `key` is free (`If-None-Match: *`).

        Returns True when the key now holds exactly `data` (written by this call or by an earlier
        identical attempt), False when it already held other bytes, which are left untouched.
        """
        ...

    def get(self, key: str, max_bytes: int) -> bytes:
        """Read the object. Raises `ObjectTooLarge` (before reading the body) past `max_bytes`,
        `ObjectNotFound` if absent."""
        ...

    def head(self, key: str) -> ObjectInfo:
        """Size, last-modified time and etag of the object; `ObjectNotFound` if absent."""
        ...

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose key starts with `prefix`, in key order, fetched page by page."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; deleting a missing key is not an error."""
        ...
