"""Load an access key pair from the files or environment variables a `CredentialSource` names.

The secret never appears in a repr, a log line or an error message: errors name the variable or
file that was missing, not its content.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from subnet.storage.config import CredentialSource


class CredentialsError(ValueError):
    """Credentials could not be loaded; the message names the source, never a value."""


@dataclass(frozen=True)
class Credentials:
    """An S3 access key pair. `repr` shows only the last 4 characters of the key id."""

    access_key_id: str
    secret_access_key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(access_key_id='…{self.access_key_id[-4:]}', secret_access_key='***')"

    __str__ = __repr__


def load_credentials(
    source: CredentialSource, environ: Mapping[str, str] | None = None
) -> Credentials | None:
    """The key pair `source` points at, or None for anonymous access.

    `environ` defaults to `os.environ`; it is read only when this is called, never at import.
    Raises `CredentialsError` naming the missing variable or unreadable file.
    """
    if source.anonymous:
        return None
    env = os.environ if environ is None else environ
    key_id = _read(source.access_key_id_file, source.access_key_id_env, env)
    secret = _read(source.secret_access_key_file, source.secret_access_key_env, env)
    return Credentials(key_id, secret)


def _read(path: Path | None, env_name: str, env: Mapping[str, str]) -> str:
    if path is not None:
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CredentialsError(f"cannot read credentials file {path}: {exc.strerror}") from None
        if not value:
            raise CredentialsError(f"credentials file {path} is empty")
        return value
    value = env.get(env_name, "").strip()
    if not value:
        raise CredentialsError(f"environment variable {env_name} is not set")
    return value
