"""``python -m subnet.room VERB``: create a room, invite, join, admit, list, revoke, leave, run, pace,
status.

Flags are the neurons' dotted flags (``--wallet.name``, ``--storage.bucket`` ...; see
:mod:`subnet.cli`) plus the room's own (``--room``, ``--invite``, ``--slot`` ...). Every error is
one ``error:`` line that says how to fix it. See docs/rooms.md for a walk-through.

Nothing heavy is imported before a verb's flags parse (``--help`` answers at once); the verbs
themselves are in :mod:`subnet.room.commands`.
"""

from __future__ import annotations

import sys
from typing import Any

from ..cli import parse_config, run_guarded

PROG = "python -m subnet.room"
_ROOM = ("room", "wallet.", "storage.")
# verb -> (what it does, the flags its --help lists)
VERBS: dict[str, tuple[str, tuple[str, ...]]] = {
    "create": (
        "create a room in your bucket: you own it, and fill --slot in its runs",
        (*_ROOM, "slot", "name"),
    ),
    "invite": (
        "print a signed, single-use invite token for one member: the --slot it fills and "
        "the --permissions it gets (default: what the slot needs)",
        (*_ROOM, "slot", "permissions", "name", "expires", "template"),
    ),
    "join": (
        "redeem an invite with your wallet; your bucket's read settings go in the room",
        ("invite", *_ROOM, "name"),
    ),
    "admit": ("admit the redeemed invites (and drop members who left): the next manifest", _ROOM),
    "members": ("list the members: name, hotkey, slots, permissions", ("room", "storage.")),
    "revoke": (
        "take --permissions (or the membership) from a --member",
        (*_ROOM, "member", "permissions"),
    ),
    "leave": ("leave the room (a leave signed by your wallet)", _ROOM),
    "run": (
        "start a run: a --template (topology @beam/NAME@VERSION or a file) pinned with its "
        "--param values and protocol settings; prints the command each member runs",
        (*_ROOM, "run", "template", "param", "tick_seconds", "protocol."),
    ),
    "pace": (
        "change a --run's tick length to --tick_seconds (owner), from the start of the window "
        "after next: members follow at their next manifest read",
        (*_ROOM, "run", "tick_seconds"),
    ),
    "status": (
        "the room's runs (or --run): model version and what each member wrote last",
        ("room", "storage.", "run"),
    ),
}
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


def usage() -> str:
    """``python -m subnet.room --help``: every verb with what it does."""
    width = max(map(len, VERBS))
    lines = [
        f"usage: {PROG} VERB [--help] [flags]",
        "",
        "Private rooms: invited members, signed manifests, runs of any topology (docs/rooms.md).",
        "",
        "verbs:",
    ]
    lines += [f"  {verb:<{width}}  {doc}" for verb, (doc, _) in VERBS.items()]
    lines += [
        "",
        f"`{PROG} VERB --help` lists a verb's flags. Environment: BEAM_WALLET_PATH, "
        "BEAM_STORAGE_ENDPOINT_URL ... set any flag (docs/configuration.md).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run one verb; 0 on success, 2 with one ``error:`` line otherwise."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in VERBS:
        print(
            f"error: unknown command {argv[0]!r}; one of {', '.join(VERBS)} (`{PROG} --help`)",
            file=sys.stderr,
        )
        return 2
    verb = argv.pop(0)

    def run() -> int:
        from .settings import RoomCommand

        doc, shown = VERBS[verb]
        cfg = parse_config(
            argv,
            prog=f"{PROG} {verb}",
            model=RoomCommand,
            shown=shown,
            description=f"{doc}. See docs/rooms.md.",
            node_title="room",
        )
        _quiet()
        return _run(verb, cfg)

    return run_guarded(run)


def _run(verb: str, cfg: Any) -> int:
    """One verb, its refusals turned into one line with the fix."""
    from ..storage.base import StorageError
    from ..topology import PlanError
    from . import commands
    from .errors import RoomError

    try:
        getattr(commands, verb)(cfg)
    except RoomError as error:
        fix = FIXES.get(error.reason)
        raise RoomError(error.reason, f"{error.detail}; {fix}" if fix else error.detail) from None
    except PlanError as error:  # a run of a topology this Beam does not know
        raise RoomError("bad_request", f"{error}; install the Beam version the run uses") from None
    except StorageError as error:
        raise RoomError(
            "unreachable", f"{error}; check --room, --storage.* and that the server is up"
        ) from None
    return 0


def _quiet() -> None:
    """Log errors only (the commands print what a person needs; retries are not news)."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="ERROR", format="{level}: {message}")
