"""``python -m subnet.room VERB``: create a room, invite, join, admit, list, revoke, leave, run, status.

Flags are the neurons' dotted flags (``--wallet.name``, ``--storage.bucket`` ...; see
:mod:`subnet.cli`) plus the room's own (``--room``, ``--invite``, ``--permissions`` ...). Every
error is one ``error:`` line that says how to fix it. See docs/rooms.md for a walk-through.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..cli import parse_config, run_guarded
from ..config import ConfigError, ProtocolConfig, WalletConfig
from ..storage.base import StorageError
from ..storage.config import StorageConfig
from .errors import RoomError

VERBS = ("create", "invite", "join", "admit", "members", "revoke", "leave", "run", "status")
USAGE = f"usage: python -m subnet.room {{{','.join(VERBS)}}} [--help] [flags]"
FIXES = {
    "expired": "ask for a new invite",
    "reused": "each invite is single-use: ask for a new one",
    "forged": "ask the owner or an admitting member of the room for an invite",
    "bad_signature": "the object was altered or not signed by who it names; ask for a new one",
    "not_found": "check --room (the address `create` printed)",
    "not_authorized": "use the owner's wallet (--wallet.name) or an admitting member's",
    "rollback": "the room's storage was tampered with; tell the room's owner",
    "fork": "the room's storage was tampered with; tell the room's owner",
    "pointer_mismatch": "the room's storage was tampered with; tell the room's owner",
    "bad_transition": "the room's storage was tampered with; tell the room's owner",
    "conflict": "pick another name, or retry",
}


class RoomSettings(BaseModel):
    """The room CLI's own settings (plus the wallet and this node's bucket)."""

    model_config = ConfigDict(extra="forbid")

    room: str = Field(
        "", description="room address: http://HOST:PORT/BUCKET/ROOM or s3://BUCKET/ROOM"
    )
    wallet: WalletConfig = WalletConfig()
    storage: StorageConfig | None = Field(None, description="this member's own bucket")
    invite: str = Field("", description="join: the invite token (beam-invite:...)")
    permissions: tuple[str, ...] = Field(
        (), description="invite: granted; revoke: taken away (empty: the member)"
    )
    slots: tuple[str, ...] = Field(
        (), description="create, invite: the topology slots the member fills (holder, miner ...)"
    )
    expires: str = Field("24h", description="invite: valid for (90s, 30m, 24h, 7d)")
    member: str = Field("", description="revoke: the member's hotkey")
    run: str = Field("", description="run, status: the run's name")
    template: str = Field("", description="run: FILE.toml or @beam/NAME@VERSION")
    tick_seconds: float = Field(1.0, gt=0, le=3600, description="run: seconds per tick")

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
    node: RoomSettings = RoomSettings()


def duration(text: str) -> float:
    """``90s``, ``30m``, ``24h``, ``7d`` or plain seconds, in seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if not match:
        raise ConfigError(f"--expires {text!r}: use a duration like 90s, 30m, 24h or 7d")
    return float(match[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]


def main(argv: list[str] | None = None) -> int:
    """Run one verb; 0 on success, 2 with one ``error:`` line otherwise."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in VERBS:
        print(USAGE if not argv or argv[0] in ("-h", "--help") else
              f"error: unknown command {argv[0]!r}; {USAGE}", file=sys.stderr)  # fmt: skip
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    verb = argv.pop(0)

    def run() -> int:
        cfg = parse_config(argv, prog=f"python -m subnet.room {verb}", model=RoomCommand,
                           description=f"room command {verb!r} (docs/rooms.md)")  # fmt: skip
        from . import commands

        try:
            getattr(commands, verb)(cfg)
        except RoomError as error:
            fix = FIXES.get(error.reason)
            raise RoomError(
                error.reason, f"{error.detail}; {fix}" if fix else error.detail
            ) from None
        except StorageError as error:
            raise RoomError("unreachable", f"{error}; check --room, --storage.* and that "
                            "the server is up") from None  # fmt: skip
        return 0

    return run_guarded(_quiet(run))


def _quiet(fn: Any) -> Any:
    """Log errors only (the commands print what a person needs; retries are not news)."""

    def wrapped() -> int:
        from loguru import logger

        logger.remove()
        logger.add(sys.stderr, level="ERROR", format="{level}: {message}")
        return fn()

    return wrapped


def read_template(ref: str) -> Any:
    """A Template from ``--template`` (a file or an exact reference)."""
    from ..topology import Template, template_from_file

    if not ref:
        raise ConfigError("--template is required: a FILE.toml or @beam/NAME@VERSION "
                          "(docs/topologies.md lists them)")  # fmt: skip
    if ref.startswith("@"):
        return Template(topology=ref)
    if not Path(ref).exists():
        raise ConfigError(f"--template {ref}: no such file; or name a topology as @beam/NAME@X.Y.Z")
    return template_from_file(ref)


def stamp(ts: float) -> str:
    """A UTC time for people."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
