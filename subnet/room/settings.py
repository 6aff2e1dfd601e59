"""The room CLI's settings: what each verb reads, typed (``python -m subnet.room VERB``)."""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..config import ConfigError, ProtocolConfig, WalletConfig
from ..storage.config import StorageConfig


class RoomFlags(BaseModel):
    """The room CLI's own settings (plus the wallet and this node's bucket)."""

    model_config = ConfigDict(extra="forbid")

    room: str = Field(
        "", description="room address: http://HOST:PORT/BUCKET/ROOM or s3://BUCKET/ROOM"
    )
    wallet: WalletConfig = WalletConfig()
    storage: StorageConfig | None = Field(None, description="this member's own bucket")
    name: str = Field(
        "", description="create: your name; invite: the invitee's name; join: yours (optional)"
    )
    invite: str = Field("", description="join: the invite token (beam-invite:...)")
    slot: tuple[str, ...] = Field(
        (), description="create, invite: the topology slot(s) the member fills (worker, miner ...)"
    )
    permissions: tuple[str, ...] = Field(
        (),
        description="invite: granted (default: what --slot needs); revoke: taken away "
        "(empty: the membership)",
    )
    expires: str = Field("24h", description="invite: valid for (90s, 30m, 24h, 7d)")
    member: str = Field("", description="revoke: the member's name or hotkey")
    run: str = Field("", description="run, status: the run's name")
    template: str = Field(
        "", description="run (and invite, for --slot's needs): FILE.toml or @beam/NAME@VERSION"
    )
    param: tuple[str, ...] = Field(
        (), description="run: a topology parameter KEY=VALUE (comma-separated for several)"
    )
    tick_seconds: float = Field(1.0, gt=0, le=3600, description="run and pace: seconds per tick")

    @field_validator("storage", mode="before")
    @classmethod
    def _bucket_or_nothing(cls, value: Any) -> Any:
        # BEAM_STORAGE_ENDPOINT_URL alone (exported once for every command) names no bucket:
        # only `create` and `join` need one, and they say so.
        return None if isinstance(value, dict) and "bucket" not in value else value


class RoomCommand(BaseModel):
    """Every setting a room command reads."""

    model_config = ConfigDict(extra="forbid")

    protocol: ProtocolConfig = ProtocolConfig()
    node: RoomFlags = RoomFlags()


def duration(text: str) -> float:
    """``90s``, ``30m``, ``24h``, ``7d`` or plain seconds, in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if not match:
        raise ConfigError(f"--expires {text!r}: use a duration like 90s, 30m, 24h or 7d")
    return float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]


def stamp(ts: float) -> str:
    """A UTC time for people."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
