"""How a participant tells the network to read its bucket, in a chain commitment.

The Commitments pallet stores at most 3 `Raw` fields of at most 128 bytes each, and the SDK hands
readers their concatenation as one string. The format is versioned, ASCII, `|`-separated::

    b1|<endpoint>|<region>|<bucket>|<prefix>|<access_key_id>|<secret_access_key>

`<endpoint>` is `aws` (AWS S3 in `<region>`), `r2:<account_id>` (Cloudflare R2), or an
`http(s)://` URL of any S3-compatible server. Empty key fields mean anonymous (public-read) access.
Only read-only keys belong here: the commitment is public.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

COMMITMENT_VERSION = "b1"
# The Commitments pallet's limits: at most 3 Raw fields of at most 128 bytes per hotkey.
MAX_FIELDS = 3
MAX_FIELD_BYTES = 128
MAX_COMMITMENT_BYTES = MAX_FIELDS * MAX_FIELD_BYTES

_R2_HOST = ".r2.cloudflarestorage.com"
# re.ASCII: `\d` must not match other scripts' digits; fullmatch: `$` would accept a final "\n".
_URL = re.compile(
    r"https?://(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?", re.ASCII
)
_R2_ACCOUNT = re.compile(r"[0-9a-f]{32}", re.ASCII)
_REGION = re.compile(r"[a-z0-9-]{1,32}", re.ASCII)
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", re.ASCII)
_PREFIX = re.compile(r"[A-Za-z0-9._/-]{0,64}", re.ASCII)
_KEY = re.compile(r"[A-Za-z0-9/+=_-]{1,128}", re.ASCII)


class CommitmentError(ValueError):
    """A commitment string (or the settings to encode) is malformed or too long."""


@dataclass(frozen=True, repr=False)
class ReadSettings:
    """Everything a peer needs to read one participant's bucket. The secret is hidden in repr."""

    bucket: str
    endpoint_url: str | None = None  # None: AWS S3 in `region`
    region: str = "us-east-1"
    prefix: str = ""
    access_key_id: str | None = None  # None (with no secret): anonymous reads
    secret_access_key: str | None = None

    def __post_init__(self) -> None:
        _validate(self)

    def __repr__(self) -> str:
        key = f"'…{self.access_key_id[-4:]}'" if self.access_key_id else "None"
        return (
            f"ReadSettings(bucket={self.bucket!r}, endpoint_url={self.endpoint_url!r}, "
            f"region={self.region!r}, prefix={self.prefix!r}, access_key_id={key})"
        )

    @property
    def anonymous(self) -> bool:
        """True when reads are unsigned (a public-read bucket)."""
        return self.access_key_id is None


def encode_commitment(settings: ReadSettings) -> str:
    """The commitment string for `settings`; at most `MAX_COMMITMENT_BYTES` bytes."""
    text = "|".join(
        [
            COMMITMENT_VERSION,
            _encode_endpoint(settings.endpoint_url),
            settings.region,
            settings.bucket,
            settings.prefix,
            settings.access_key_id or "",
            settings.secret_access_key or "",
        ]
    )
    if len(text.encode()) > MAX_COMMITMENT_BYTES:
        raise CommitmentError(f"commitment is {len(text)} bytes, limit {MAX_COMMITMENT_BYTES}")
    return text


def is_beam_commitment(text: str) -> bool:
    """Whether ``text`` is a Beam storage commitment of any version (``b1|...``, ``b2|...``):
    what a neuron may replace without asking (see ``subnet.chain.commitments.check_overwrite``)."""
    return isinstance(text, str) and re.match(r"b\d+\|", text) is not None


def decode_commitment(text: str) -> ReadSettings:
    """Parse and validate a commitment string (as the SDK returns it: fields concatenated).

    Total: anything that is not a valid commitment (another type included) is a
    `CommitmentError`.
    """
    if not isinstance(text, str):
        raise CommitmentError(f"commitment is a {type(text).__name__}, not a string")
    if len(text.encode("utf-8", errors="replace")) > MAX_COMMITMENT_BYTES:
        raise CommitmentError(f"commitment longer than {MAX_COMMITMENT_BYTES} bytes")
    parts = text.split("|")
    if not parts or parts[0] != COMMITMENT_VERSION:
        raise CommitmentError(f"not a {COMMITMENT_VERSION} Beam storage commitment")
    if len(parts) != 7:
        raise CommitmentError(f"expected 7 '|'-separated parts, got {len(parts)}")
    _, endpoint, region, bucket, prefix, key_id, secret = parts
    return ReadSettings(
        bucket=bucket,
        endpoint_url=_decode_endpoint(endpoint),
        region=region,
        prefix=prefix,
        access_key_id=key_id or None,
        secret_access_key=secret or None,
    )


def _encode_endpoint(url: str | None) -> str:
    if url is None:
        return "aws"
    host = url.removeprefix("https://")
    if host.endswith(_R2_HOST) and _R2_ACCOUNT.fullmatch(host[: -len(_R2_HOST)]):
        return f"r2:{host[: -len(_R2_HOST)]}"
    return url


def _decode_endpoint(text: str) -> str | None:
    if text == "aws":
        return None
    if text.startswith("r2:"):
        account = text[3:]
        if not _R2_ACCOUNT.fullmatch(account):
            raise CommitmentError("r2 account id must be 32 lowercase hex characters")
        return f"https://{account}{_R2_HOST}"
    return text


def _validate(s: ReadSettings) -> None:
    checks = [
        (s.endpoint_url is None or bool(_URL.fullmatch(s.endpoint_url)), "endpoint_url"),
        (bool(_REGION.fullmatch(s.region)), "region"),
        (bool(_BUCKET.fullmatch(s.bucket)), "bucket"),
        (bool(_PREFIX.fullmatch(s.prefix)) and ".." not in s.prefix.split("/"), "prefix"),
        ((s.access_key_id is None) == (s.secret_access_key is None), "key pair (both or neither)"),
        (s.access_key_id is None or bool(_KEY.fullmatch(s.access_key_id)), "access_key_id"),
        (
            s.secret_access_key is None or bool(_KEY.fullmatch(s.secret_access_key)),
            "secret_access_key",
        ),
    ]
    for ok, name in checks:
        if not ok:
            raise CommitmentError(f"invalid {name} in storage read settings")


READ_KEY_ENV = "BEAM_S3_READ_ACCESS_KEY_ID"
READ_SECRET_ENV = "BEAM_S3_READ_SECRET_ACCESS_KEY"


def own_read_settings(storage) -> ReadSettings:
    """How peers read the bucket of ``storage`` (a ``StorageConfig``), with the read-only keys
    from ``BEAM_S3_READ_*`` if set; ValueError if only one of the two is set."""
    key, secret = os.environ.get(READ_KEY_ENV), os.environ.get(READ_SECRET_ENV)
    if bool(key) != bool(secret):
        raise ValueError(f"set both {READ_KEY_ENV} and {READ_SECRET_ENV}, or neither")
    return ReadSettings(
        bucket=storage.bucket,
        endpoint_url=storage.endpoint_url,
        region=storage.region,
        prefix=storage.prefix,
        access_key_id=key or None,
        secret_access_key=secret or None,
    )
