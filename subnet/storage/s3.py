"""`ObjectStore` over S3 and S3-compatible servers (AWS S3, Cloudflare R2, MinIO, moto).

The only module in Beam that imports boto3. Every call has connect and read timeouts and is retried
a bounded number of times with full-jitter exponential backoff when the failure is transient
(5xx, throttling, timeouts, dropped connections). Objects above the multipart threshold are sent in
parts; `put_if_absent` uses `If-None-Match: *` on both paths, so a key is written at most once.
"""

from __future__ import annotations

import hashlib
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as BotoConnectionError
from loguru import logger

from subnet.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    ObjectTooLarge,
    StorageError,
    StorageReason,
)
from subnet.storage.config import StorageConfig
from subnet.storage.counting import ByteMeter, count_body, meter_client
from subnet.storage.credentials import Credentials, load_credentials
from subnet.storage.deadline import Deadline, DeadlineExceeded, run_bounded

T = TypeVar("T")

_TRANSIENT_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
    "ConditionalRequestConflict",
    "OperationAborted",
}
_DENIED_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "AllAccessDisabled",
    "Forbidden",
    "403",
}
_NETWORK_ERRORS = (BotoConnectionError, HTTPClientError, IncompleteReadError)


def backoff_delay(attempt: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Full-jitter exponential backoff before retry `attempt` (1-based): U(0, min(max, base*2^(n-1)))."""
    return rng.uniform(0.0, min(max_s, base_s * 2 ** (attempt - 1)))


def multipart_etag(data: bytes, part_bytes: int) -> str:
    """The etag S3 gives an object uploaded in `part_bytes` parts: md5 of the part md5s, `-N`."""
    digests = [
        hashlib.md5(data[i : i + part_bytes], usedforsecurity=False).digest()
        for i in range(0, len(data), part_bytes)
    ]
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


class S3Store:
    """An `ObjectStore` on one bucket (and key prefix) of an S3-compatible endpoint."""

    def __init__(
        self,
        config: StorageConfig,
        credentials: Credentials | None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        """Build the client; `credentials=None` sends unsigned (anonymous) requests."""
        self.config = config
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._client = _make_client(config, credentials)
        self._meter: ByteMeter | None = None

    def attach_meter(self, meter: ByteMeter) -> None:
        """Count every byte this store's client sends and receives on ``meter``.

        One meter per store: attaching the same one again does nothing, another is an error.
        """
        if self._meter is not None and self._meter is not meter:
            raise ValueError(f"{self.location} already counts on another meter")
        if self._meter is None:
            self._meter = meter
            meter_client(self._client, meter)

    @classmethod
    def from_config(cls, config: StorageConfig, environ: dict[str, str] | None = None) -> S3Store:
        """Load credentials from where `config.credentials` points, then build the store."""
        return cls(config, load_credentials(config.credentials, environ))

    @property
    def location(self) -> str:
        """`s3://bucket/prefix@endpoint`, with no secret in it."""
        return f"s3://{self.config.bucket}/{self.config.prefix}@{self.config.endpoint_label}"

    # --- the ObjectStore protocol -------------------------------------------------------------

    def put(self, key: str, data: bytes) -> None:
        """Write `data` under `key`, replacing any existing object."""
        self._write(key, data, if_absent=False)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write once: True when the key now holds exactly `data`, False when it held other bytes.

        A retried write can find its own earlier attempt already committed; the etag comparison
        tells that case (True) apart from a genuine conflict (False).
        """
        if self._write(key, data, if_absent=True):
            return True
        multipart = len(data) > self.config.multipart_threshold_bytes
        expected = (
            multipart_etag(data, self.config.multipart_part_bytes)
            if multipart
            else hashlib.md5(data, usedforsecurity=False).hexdigest()
        )
        return self.head(key).etag == expected

    def get(self, key: str, max_bytes: int) -> bytes:
        """Read the object; the size is checked from the response headers before the body.

        The whole call (attempts and body) has a deadline of `object_deadline_s` plus the time
        the announced size takes at `min_rate_bytes_s`, so a drip-feeding endpoint is cut off.
        """
        deadline = self._deadline()

        def fetch() -> bytes:
            response = self._client.get_object(Bucket=self.config.bucket, Key=self._full(key))
            body = response["Body"]
            deadline.on_abort(lambda: _shutdown(body))
            try:
                size = self._length(response, key)
                if size > max_bytes:
                    raise ObjectTooLarge(
                        "too_large",
                        endpoint=self.config.endpoint_label,
                        bucket=self.config.bucket,
                        key=key,
                        detail=f"{size} bytes > limit {max_bytes}",
                    )
                deadline.allow(size)
                data = body.read()  # botocore stops at Content-Length and checks it was reached
                count_body(self._meter, len(data))
                return data
            finally:
                body.close()

        return self._call("get", key, fetch, deadline)

    def head(self, key: str) -> ObjectInfo:
        """Size, last-modified time and etag of the object.

        An answer without a valid Content-Length or Last-Modified is `bad_response`: the
        endpoint is not a working S3 store, and the caller treats it like any failing sender.
        """
        r = self._call(
            "head",
            key,
            lambda: self._client.head_object(Bucket=self.config.bucket, Key=self._full(key)),
        )
        modified = r.get("LastModified")
        if not isinstance(modified, datetime):
            raise self._bad(key, "no Last-Modified")
        etag = r.get("ETag")
        return ObjectInfo(
            key, self._length(r, key), modified, etag.strip('"') if isinstance(etag, str) else ""
        )

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects under `prefix` in key order, one retried request per page of up to 1,000."""
        strip = len(self.config.prefix)
        token: str | None = None
        while True:
            args: dict[str, Any] = {"Bucket": self.config.bucket, "Prefix": self._full(prefix)}
            if token:
                args["ContinuationToken"] = token
            page = self._call("list", prefix, lambda a=args: self._client.list_objects_v2(**a))
            for item in page.get("Contents", []):
                yield ObjectInfo(
                    item["Key"][strip:],
                    int(item["Size"]),
                    item["LastModified"],
                    item.get("ETag", "").strip('"'),
                )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def delete(self, key: str) -> None:
        """Remove the object; S3 treats a missing key as success."""
        self._call(
            "delete",
            key,
            lambda: self._client.delete_object(Bucket=self.config.bucket, Key=self._full(key)),
        )

    # --- bucket-level helpers -----------------------------------------------------------------

    def check(self) -> None:
        """Fail fast with one clear error if the bucket is missing, denied or unreachable."""
        self._call("check", None, lambda: self._client.head_bucket(Bucket=self.config.bucket))

    def check_write_once(self) -> None:
        """Fail with ``no_write_once`` unless the bucket refuses a second write to a key.

        Every object a neuron writes is written once (``put_if_absent``); a provider that ignores
        ``If-None-Match`` would let a restarted miner replace its own upload with another signed
        payload, which readers then hold as two payloads signed for one window (the validators
        ban a sender for that: ``subnet/neuron/equivocation.py``). Two small writes and a delete.
        """
        key = f"beam-probe/write-once-{secrets.token_hex(8)}"
        try:
            first = self.put_if_absent(key, b"first")
            if not first or self.put_if_absent(key, b"second"):
                raise StorageError(
                    "no_write_once",
                    endpoint=self.config.endpoint_label,
                    bucket=self.config.bucket,
                    key=key,
                    detail="a conditional write (If-None-Match: *) to a taken key succeeded",
                )
        finally:
            try:
                self.delete(key)
            except StorageError as error:
                logger.info("could not delete the write-once probe {}: {}", key, error)

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (local servers and first-time setup)."""
        try:
            self.check()
        except StorageError as exc:
            if exc.reason != "bucket_not_found":
                raise
            args: dict[str, Any] = {"Bucket": self.config.bucket}
            if self.config.region not in ("us-east-1", "auto"):
                args["CreateBucketConfiguration"] = {"LocationConstraint": self.config.region}
            self._call("create_bucket", None, lambda: self._client.create_bucket(**args))
            logger.info("created bucket {}", self.location)

    # --- internals ----------------------------------------------------------------------------

    def _full(self, key: str) -> str:
        return self.config.prefix + key

    def _write(self, key: str, data: bytes, *, if_absent: bool) -> bool:
        """Upload; False only when `if_absent` and the key was already taken."""
        if len(data) > self.config.multipart_threshold_bytes:
            return self._write_multipart(key, data, if_absent=if_absent)
        extra = {"IfNoneMatch": "*"} if if_absent else {}
        put = partial(
            self._client.put_object,
            Bucket=self.config.bucket,
            Key=self._full(key),
            Body=data,
            **extra,
        )
        return self._call("put", key, partial(_taken_is_false, put), self._deadline(len(data)))

    def _write_multipart(self, key: str, data: bytes, *, if_absent: bool) -> bool:
        target = {"Bucket": self.config.bucket, "Key": self._full(key)}
        step = self.config.multipart_part_bytes
        create = partial(self._client.create_multipart_upload, **target)
        upload = self._call("put", key, create)["UploadId"]
        try:
            parts = []
            for number, start in enumerate(range(0, len(data), step), start=1):
                send = partial(
                    self._client.upload_part,
                    **target,
                    UploadId=upload,
                    PartNumber=number,
                    Body=data[start : start + step],
                )
                sent = self._call("put", key, send, self._deadline(step))
                parts.append({"PartNumber": number, "ETag": sent["ETag"]})
            complete = partial(
                self._client.complete_multipart_upload,
                **target,
                UploadId=upload,
                MultipartUpload={"Parts": parts},
                **({"IfNoneMatch": "*"} if if_absent else {}),
            )
            try:
                written = self._call("put", key, partial(_taken_is_false, complete))
            except ObjectNotFound:
                # NoSuchUpload: a completion whose answer was lost already finished the upload.
                return self.head(key).etag == multipart_etag(data, step)
        except BaseException:
            self._abort(key, upload)
            raise
        if not written:
            self._abort(key, upload)
        return written

    def _abort(self, key: str, upload_id: str) -> None:
        try:
            self._client.abort_multipart_upload(
                Bucket=self.config.bucket, Key=self._full(key), UploadId=upload_id
            )
        except (ClientError, BotoCoreError) as exc:
            # The bucket's lifecycle rule reclaims orphaned parts; the original error matters more.
            logger.warning(
                "could not abort multipart upload of {} in {}: {}",
                key,
                self.location,
                type(exc).__name__,
            )

    def _deadline(self, nbytes: int = 0) -> Deadline:
        deadline = Deadline(
            self.config.object_deadline_s, min_rate_bytes_s=self.config.min_rate_bytes_s
        )
        deadline.allow(nbytes)
        return deadline

    def _length(self, response: dict[str, Any], key: str) -> int:
        size = response.get("ContentLength")
        if type(size) is not int or size < 0:
            raise self._bad(key, "no valid Content-Length")
        return size

    def _bad(self, key: str | None, detail: str) -> StorageError:
        return StorageError(
            "bad_response",
            endpoint=self.config.endpoint_label,
            bucket=self.config.bucket,
            key=key,
            detail=detail,
        )

    def _call(
        self, op: str, key: str | None, fn: Callable[[], T], deadline: Deadline | None = None
    ) -> T:
        """Run one S3 request with bounded retries, all within one deadline; raise a
        `StorageError` when giving up."""
        deadline = deadline or self._deadline()
        attempts = self.config.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                return run_bounded(fn, deadline)
            except DeadlineExceeded as exc:
                raise StorageError(
                    "too_slow",
                    endpoint=self.config.endpoint_label,
                    bucket=self.config.bucket,
                    key=key,
                    detail=str(exc),
                ) from None
            except (ClientError, BotoCoreError) as exc:
                if not _is_transient(exc) or attempt == attempts:
                    raise self._error(exc, key, transient=_is_transient(exc)) from exc
                delay = backoff_delay(
                    attempt, self.config.backoff_base_s, self.config.backoff_max_s, self._rng
                )
                delay = min(delay, max(0.0, deadline.remaining()))
                logger.warning(
                    "s3 {} {} in {} failed (attempt {}/{}: {}); retrying in {:.2f}s",
                    op,
                    key or "",
                    self.location,
                    attempt,
                    attempts,
                    _code(exc),
                    delay,
                )
                self._sleep(delay)
            except (ValueError, TypeError, KeyError, RecursionError, UnicodeError) as exc:
                # botocore could not make sense of the answer (a timestamp that is not a date,
                # a redirect loop, a garbled XML body): the endpoint misbehaves, not us.
                raise self._bad(key, f"{type(exc).__name__}: {str(exc)[:120]}") from None
        raise AssertionError("unreachable: the loop returns or raises")

    def _error(self, exc: Exception, key: str | None, *, transient: bool) -> StorageError:
        reason = _reason(exc, key, transient)
        cls = ObjectNotFound if reason == "not_found" else StorageError
        return cls(
            reason,
            endpoint=self.config.endpoint_label,
            bucket=self.config.bucket,
            key=key,
            detail=_code(exc),
        )


# Created on first use (no import-time side effects); a fresh session per client re-read and
# re-parsed botocore's JSON service models each time (~0.5 s of CPU a client).
_SESSION: boto3.session.Session | None = None
_SESSION_LOCK = threading.Lock()


def _make_client(config: StorageConfig, credentials: Credentials | None) -> Any:
    style = config.addressing_style
    if style == "auto" and config.endpoint_url is not None:
        style = "path"  # custom endpoints rarely have wildcard DNS for virtual-host buckets
    botocore_config = Config(
        connect_timeout=config.connect_timeout_s,
        read_timeout=config.read_timeout_s,
        retries={"total_max_attempts": 1},  # Beam retries itself, so the policy is visible
        s3={"addressing_style": style},
        signature_version=UNSIGNED if credentials is None else None,
        # Default CRC checksums (boto3 >= 1.36) are not understood by every S3-compatible server.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        user_agent_extra="beam",
    )
    with _SESSION_LOCK:  # one botocore session per process: its loader parses the S3 model once
        global _SESSION
        _SESSION = _SESSION or boto3.session.Session()
        return _SESSION.client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=config.region,
            aws_access_key_id=credentials.access_key_id if credentials else None,
            aws_secret_access_key=credentials.secret_access_key if credentials else None,
            config=botocore_config,
        )


def _taken_is_false(put: Callable[[], Any]) -> bool:
    """Run a conditional write; a 412 (key already taken) becomes False instead of an error."""
    try:
        put()
    except ClientError as exc:
        if _status(exc) == 412 or _code(exc) == "PreconditionFailed":
            return False
        raise
    return True


def _status(exc: Exception) -> int:
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return 0


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or _status(exc))
    return type(exc).__name__


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, _NETWORK_ERRORS):
        return True
    status = _status(exc)
    return status >= 500 or status == 429 or _code(exc) in _TRANSIENT_CODES


def _reason(exc: Exception, key: str | None, transient: bool) -> StorageReason:
    if isinstance(exc, _NETWORK_ERRORS):
        return "unreachable"
    if transient:
        return "unavailable"
    code, status = _code(exc), _status(exc)
    if code == "NoSuchBucket" or (status == 404 and key is None):
        return "bucket_not_found"
    if code in ("NoSuchKey", "NotFound", "404") or status == 404:
        return "not_found"
    if code in _DENIED_CODES or status in (401, 403):
        return "access_denied"
    if 300 <= status < 400:
        return "bad_response"  # a redirect botocore did not resolve: a loop, or not S3 at all
    if type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return "credentials"
    return "invalid_request"


def _shutdown(body: Any) -> None:
    """Unblock a body read stuck in another thread (urllib3 >= 2.3 `HTTPResponse.shutdown`)."""
    raw = getattr(body, "_raw_stream", None)
    try:
        raw.shutdown()  # type: ignore[union-attr]
    except (AttributeError, ValueError, RuntimeError, OSError):
        body.close()
