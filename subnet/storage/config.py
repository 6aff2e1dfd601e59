"""Typed settings for one S3 (or S3-compatible) bucket.

Secrets are never settings: `CredentialSource` names the environment variables or files that hold
them, so a config file or command line can be shared and logged safely.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import ConfigError

MIB = 1024 * 1024
S3_MIN_PART_BYTES = 5 * MIB  # S3's minimum size of every multipart part except the last


class CredentialSource(BaseModel):
    """Where the access key pair comes from: files (preferred for containers) or env vars.

    A file, when set, wins over its environment variable. `anonymous` sends unsigned requests
    (a public-read bucket) and ignores the rest.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    access_key_id_env: str = Field(
        "BEAM_S3_ACCESS_KEY_ID", description="environment variable holding the write key id"
    )
    secret_access_key_env: str = Field(
        "BEAM_S3_SECRET_ACCESS_KEY", description="environment variable holding the write secret"
    )
    access_key_id_file: Path | None = Field(
        None, description="file holding only the write key id (wins over the variable)"
    )
    secret_access_key_file: Path | None = Field(
        None, description="file holding only the write secret, e.g. /run/secrets/beam_s3_secret"
    )
    anonymous: bool = Field(
        False, description="send unsigned requests (a public-read bucket; reads only)"
    )


class StorageConfig(BaseModel):
    """One bucket: where it is, how patiently to talk to it, and where its credentials live.

    AWS S3: leave `endpoint_url` unset and set `region`. Cloudflare R2: `endpoint_url` =
    `https://<account_id>.r2.cloudflarestorage.com`, `region` = `auto`. Any other S3-compatible
    server (MinIO, Ceph, moto): its URL, usually with `addressing_style="path"`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str = Field(
        min_length=3, max_length=63, description="this node's own bucket (it writes here)"
    )
    endpoint_url: str | None = Field(
        None,
        description="S3 endpoint URL; unset for AWS S3 (R2: https://<account>.r2.cloudflarestorage.com)",
    )
    region: str = Field("us-east-1", description="bucket region; auto for Cloudflare R2")
    prefix: str = Field("", description="every key is stored under this prefix, e.g. beam/")
    addressing_style: str = Field(
        "auto", description="auto, path or virtual (path suits MinIO, moto and local servers)"
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0, description="seconds per connection attempt"
    )
    read_timeout_s: float = Field(
        default=30.0, gt=0, description="seconds per socket read (not per object)"
    )
    # Per call, every attempt and the whole body included: this much, plus size / min rate.
    object_deadline_s: float = Field(
        default=60.0, gt=0, description="seconds per storage call, plus size / min_rate_bytes_s"
    )
    min_rate_bytes_s: float = Field(
        default=1 * MIB, gt=0, description="a transfer slower than this (bytes/s) is cut off"
    )
    max_attempts: int = Field(
        default=5, ge=1, le=20, description="tries per storage call, the first included"
    )
    backoff_base_s: float = Field(
        default=0.25, ge=0, description="first retry waits up to this, then doubles (jittered)"
    )
    backoff_max_s: float = Field(default=8.0, ge=0, description="longest wait between retries")
    multipart_threshold_bytes: int = Field(
        default=64 * MIB, ge=S3_MIN_PART_BYTES, description="objects larger go up in parts"
    )
    multipart_part_bytes: int = Field(
        default=16 * MIB, ge=S3_MIN_PART_BYTES, description="size of each multipart part"
    )
    credentials: CredentialSource = CredentialSource()

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")) or "@" in value:
            raise ValueError("endpoint_url must be http(s)://host[:port] with no credentials in it")
        return value.rstrip("/")

    @field_validator("prefix")
    @classmethod
    def _prefix_is_relative(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("prefix must be a relative key prefix without '..'")
        return value

    @field_validator("addressing_style")
    @classmethod
    def _known_style(cls, value: str) -> str:
        if value not in ("auto", "path", "virtual"):
            raise ValueError("addressing_style must be auto, path or virtual")
        return value

    @model_validator(mode="after")
    def _parts_fit_threshold(self) -> StorageConfig:
        if self.multipart_part_bytes > self.multipart_threshold_bytes:
            raise ValueError("multipart_part_bytes must not exceed multipart_threshold_bytes")
        return self

    @property
    def endpoint_label(self) -> str:
        """The endpoint as shown in logs and errors (AWS's default when unset)."""
        return self.endpoint_url or f"aws:{self.region}"


def require_bucket(storage: StorageConfig | None) -> StorageConfig:
    """This node's bucket settings; ``ConfigError`` (one line, the same in every mode) if none."""
    if storage is None:
        raise ConfigError(
            "no bucket configured; set --storage.bucket (and --storage.endpoint_url for R2 or "
            "a local server): peers read your uploads there; see docs/storage.md"
        )
    return storage
