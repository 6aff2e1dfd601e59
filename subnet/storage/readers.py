"""A read-only `ObjectStore` for every hotkey, built from the metagraph's commitments.

Peers refresh the pool after each metagraph sync. Clients are built lazily on first use and kept
while a hotkey's commitment is unchanged. A commitment that does not parse, or that points at a
private or loopback address (a hostile miner could aim validators at cloud metadata services), is
recorded as invalid with its reason instead of failing the refresh.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from loguru import logger

from subnet.storage.base import ObjectStore
from subnet.storage.commitment import CommitmentError, ReadSettings, decode_commitment
from subnet.storage.config import StorageConfig
from subnet.storage.credentials import Credentials

StoreFactory = Callable[[ReadSettings], ObjectStore]


def s3_reader(
    settings: ReadSettings,
    *,
    connect_timeout_s: float = 5.0,
    read_timeout_s: float = 10.0,
    max_attempts: int = 3,
    object_deadline_s: float = 20.0,
) -> ObjectStore:
    """An S3 store that reads the bucket `settings` describe (unsigned if no key pair).

    A peer's bucket gets `object_deadline_s` per call plus 1 s per MiB of the object, so one
    stalled or drip-feeding endpoint costs a reader seconds, never its whole phase.
    """
    from subnet.storage.s3 import S3Store  # boto3 loads only when a reader is first used

    config = StorageConfig(
        bucket=settings.bucket,
        endpoint_url=settings.endpoint_url,
        region=settings.region,
        prefix=settings.prefix,
        connect_timeout_s=connect_timeout_s,
        read_timeout_s=read_timeout_s,
        max_attempts=max_attempts,
        object_deadline_s=object_deadline_s,
    )
    credentials = None
    if settings.access_key_id and settings.secret_access_key:
        credentials = Credentials(settings.access_key_id, settings.secret_access_key)
    return S3Store(config, credentials)


def check_endpoint(settings: ReadSettings, *, allow_private: bool) -> None:
    """Refuse endpoints on loopback, private, link-local or reserved addresses unless allowed."""
    if allow_private or settings.endpoint_url is None:
        return
    host = urlsplit(settings.endpoint_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        raise CommitmentError(f"endpoint host {host} is local")
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:  # a DNS name: every address it resolves to must be public too
        addresses = _resolve(host)
    for address in addresses:
        if not address.is_global:
            raise CommitmentError(f"endpoint {host} reaches {address}, not a public address")


def _resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses ``host`` resolves to now (a name that does not resolve is refused).

    This stops names such as ``169.254.169.254.nip.io`` from aiming validators at cloud
    metadata services; a name that changes its answer after this check (DNS rebinding) is not
    covered here.
    """
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as error:
        raise CommitmentError(f"endpoint host {host} does not resolve: {error}") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


class ReaderPool:
    """Hotkey -> reader `ObjectStore`, kept in step with the chain's commitments."""

    def __init__(
        self, *, factory: StoreFactory = s3_reader, allow_private_endpoints: bool = False
    ) -> None:
        """`allow_private_endpoints=True` is for local networks (moto on 127.0.0.1)."""
        self._factory = factory
        self._allow_private = allow_private_endpoints
        self._settings: dict[str, tuple[str, ReadSettings]] = {}
        self._stores: dict[str, ObjectStore] = {}
        self.invalid: dict[str, str] = {}  # hotkey -> why its commitment was refused

    def update(self, commitments: Mapping[str, str]) -> None:
        """Replace the pool's view with `{hotkey: commitment string}` from the metagraph."""
        settings: dict[str, tuple[str, ReadSettings]] = {}
        invalid: dict[str, str] = {}
        for hotkey, text in commitments.items():
            if not text:
                continue  # no commitment yet: nothing to read
            known = self._settings.get(hotkey)
            if known is not None and known[0] == text:
                settings[hotkey] = known
                continue
            try:
                parsed = decode_commitment(text)
                check_endpoint(parsed, allow_private=self._allow_private)
            except CommitmentError as exc:
                invalid[hotkey] = str(exc)
                logger.info("ignoring storage commitment of {}: {}", hotkey, exc)
                continue
            settings[hotkey] = (text, parsed)
            self._stores.pop(hotkey, None)  # changed settings: rebuild the client on next use
        self._stores = {k: v for k, v in self._stores.items() if k in settings}
        self._settings, self.invalid = settings, invalid

    def get(self, hotkey: str) -> ObjectStore | None:
        """The reader for `hotkey`, or None when it has no valid commitment."""
        store = self._stores.get(hotkey)
        if store is None and hotkey in self._settings:
            store = self._stores[hotkey] = self._factory(self._settings[hotkey][1])
        return store

    def settings(self, hotkey: str) -> ReadSettings | None:
        """The decoded read settings of `hotkey`, or None."""
        entry = self._settings.get(hotkey)
        return entry[1] if entry else None

    def hotkeys(self) -> list[str]:
        """Hotkeys with a valid commitment, sorted."""
        return sorted(self._settings)

    def __contains__(self, hotkey: object) -> bool:
        return hotkey in self._settings

    def __len__(self) -> int:
        return len(self._settings)


def build_readers(
    commitments: Mapping[str, str], *, allow_private_endpoints: bool = False
) -> ReaderPool:
    """A `ReaderPool` filled from `{hotkey: commitment string}` in one call."""
    pool = ReaderPool(allow_private_endpoints=allow_private_endpoints)
    pool.update(commitments)
    return pool
