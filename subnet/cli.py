"""Bittensor-style dotted flags (``--wallet.name``, ``--subtensor.network`` ...) -> BeamConfig.

The flags are derived from the config models, so ``--help`` cannot drift from what the config
accepts. Every setting can come from four places; the first that has it wins:

1. a flag: ``--wallet.name m1``
2. an environment variable: ``BEAM_WALLET_NAME=m1`` (``BEAM_`` + the flag, upper case, ``_``)
3. the file given with ``--config FILE.toml`` (``[wallet] name = "m1"``; protocol settings in
   ``[protocol]``; ``netuid`` at the top level)
4. the default

Secrets are not settings: there are no flags for passwords or storage keys.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .config import BeamConfig, ConfigError, load_toml

ENV_PREFIX = "BEAM_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Flag:
    """One leaf setting: where it lives in the config and how it is spelled outside."""

    path: tuple[str, ...]  # e.g. ("node", "wallet", "name")
    name: str  # e.g. "wallet.name"
    kind: type  # str, int, float, bool, tuple (comma-separated) or Path
    default: Any
    help: str
    choices: tuple = ()

    @property
    def env(self) -> str:
        """The environment variable that sets this flag."""
        return ENV_PREFIX + self.name.upper().replace(".", "_")


def _leaf_type(annotation: Any) -> tuple[type, tuple]:
    """The flag type of a field and, for a Literal, its choices."""
    origin = get_origin(annotation)
    if origin is Literal:
        return str, get_args(annotation)
    if origin in (tuple, list):
        return tuple, ()
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args and origin is not None:
        return _leaf_type(args[0])
    return annotation, ()


def iter_flags(model: type[BaseModel] = BeamConfig) -> Iterator[Flag]:
    """Every leaf setting of ``model``; node settings drop their ``node.`` prefix.

    The default shown is the effective one: a nested model's own default instance wins over its
    class defaults (``protocol.outer`` defaults to ``OuterConfig(name="sgd", lr=2.0)``, not to
    the class's ``nesterov``).
    """

    def walk(cls: type[BaseModel], path: tuple[str, ...], instance: Any) -> Iterator[Flag]:
        for field_name, info in cls.model_fields.items():
            kind, choices = _leaf_type(info.annotation)
            here = (*path, field_name)
            default = info.get_default(call_default_factory=True)
            if instance is not None:
                default = getattr(instance, field_name)
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from walk(kind, here, default if isinstance(default, BaseModel) else None)
                continue
            name = ".".join(here[1:] if here[0] == "node" else here)
            if info.is_required() and instance is None:
                default = "required"
            yield Flag(here, name, kind, default, info.description or "", choices)

    yield from walk(model, (), None)


# Which settings each entry point reads (by flag-name prefix); every flag is still accepted, but
# a role's --help lists only these. Protocol settings are shared by every participant.
ROLE_SETTINGS: dict[str, tuple[str, ...]] = {
    "miner": (
        "protocol.",
        "netuid",
        "room",
        "run",
        "wallet.",
        "subtensor.",
        "logging.",
        "neuron.",
        "storage.",
        "wandb.",
        "parallel.",
    ),
    "validator": (
        "protocol.",
        "netuid",
        "room",
        "run",
        "wallet.",
        "subtensor.",
        "logging.",
        "neuron.",
        "storage.",
        "wandb.",
    ),
    "holder": (
        "protocol.",
        "netuid",
        "room",
        "run",
        "wallet.",
        "subtensor.",
        "logging.",
        "neuron.",
        "storage.",
        "data.",
        "wandb.",
    ),
    "chain": ("netuid", "wallet.", "subtensor.", "logging."),
}

# --help lists a node's own settings first, in the order an operator sets them, then the
# protocol's (shared by everyone, usually from the --config file the subnet publishes).
SECTION_ORDER = ("node", "wallet", "subtensor", "storage", "neuron", "logging", "parallel")
PROTOCOL_TITLE = (
    "protocol settings (shared by every participant; take them from the --config file the "
    "subnet or run publishes, do not set them one by one)"
)

SECRETS_HELP = (
    "Secrets are never flags: a wallet password comes from BT_WALLET_PASSWORD or the file named "
    "by BT_WALLET_PASSWORD_FILE; this node's bucket keys from BEAM_S3_ACCESS_KEY_ID and "
    "BEAM_S3_SECRET_ACCESS_KEY (or the files named by --storage.credentials.access_key_id_file "
    "and --storage.credentials.secret_access_key_file); the read-only pair committed on chain "
    "from BEAM_S3_READ_ACCESS_KEY_ID and BEAM_S3_READ_SECRET_ACCESS_KEY (docs/storage.md). "
    "Precedence: flag > BEAM_* environment variable > --config file > default "
    "(docs/configuration.md)."
)


def _version() -> str:
    from . import __version__
    from .storage.keys import PROTOCOL_VERSION

    return f"beam {__version__} (protocol v{PROTOCOL_VERSION})"


class ArgParser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one ConfigError line, not a usage dump.

    Abbreviations are refused unless asked for: ``--serv`` must not quietly mean ``--serve``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # argparse calls this for every bad argument
        raise ConfigError(_suggest(message, self._option_string_actions)) from None


def _suggest(message: str, known: Mapping[str, Any]) -> str:
    """``unrecognized arguments: --wallet.nmae`` -> the same with ``did you mean --wallet.name``."""
    if message.startswith("unrecognized arguments:"):
        words = [w for w in message.split(":", 1)[1].split() if w.startswith("--")]
        hints = []
        for word in words:
            close = difflib.get_close_matches(word.split("=", 1)[0], list(known), n=1, cutoff=0.6)
            hints.append(f"{word} (did you mean {close[0]}?)" if close else word)
        if hints:
            return f"unknown flag {', '.join(hints)}; see --help for every flag"
    return f"{message}; see --help"


def build_parser(
    prog: str,
    description: str,
    model: type[BaseModel] = BeamConfig,
    role: str | None = None,
    shown: tuple[str, ...] | None = None,
    node_title: str = "node",
) -> argparse.ArgumentParser:
    """An argparse parser with one flag per setting plus ``--config`` and ``--version``.

    Abbreviated flags are refused (``--wallet.n`` is not ``--wallet.name``); a boolean setting
    takes ``--x`` / ``--no-x``. With ``role`` (a key of ``ROLE_SETTINGS``), or ``shown`` (flag
    name prefixes), the help lists only those settings; the others are still accepted. The
    protocol's settings (shared, from the subnet's file) are listed apart, by ``--help-protocol``,
    so that ``--help`` is the node's own flags. ``node_title`` heads the top-level flags.
    """
    parser = ArgParser(
        prog=prog,
        usage=f"{prog} [--config FILE.toml] [--SETTING VALUE ...]",
        description=description,
        epilog=SECRETS_HELP,
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--config",
        metavar="FILE.toml",
        help="read settings from a TOML file ([protocol] table for the shared settings)",
    )
    # A neuron's protocol settings come from the subnet's file: listed apart. (A room's `run`
    # verb, which pins them, passes ``shown`` and lists them with its own.)
    apart = shown is None and role is not None
    shown = shown if shown is not None else ROLE_SETTINGS.get(role or "")
    if apart and shown is not None and "protocol." in shown and len(shown) > 1:
        shown = tuple(p for p in shown if p != "protocol.")
        parser.add_argument(
            "--help-protocol",
            action=_ProtocolHelp,
            text=lambda: _protocol_help(prog, description, model),
        )
    flags = sorted(iter_flags(model), key=lambda f: _section_rank(_section(f)))
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in flags:
        section = _section(flag)
        if section not in groups:
            title = {"protocol": PROTOCOL_TITLE, "node": node_title}.get(section, section)
            groups[section] = parser.add_argument_group(title)
        _add_flag(groups[section], flag, shown)
    return parser


def _add_flag(group: argparse._ArgumentGroup, flag: Flag, shown: tuple[str, ...] | None) -> None:
    """Add one setting's flag to its group, its help hidden unless ``shown`` names it."""
    default = ",".join(map(str, flag.default)) if flag.kind is tuple else flag.default
    choices = f"; one of {', '.join(map(str, flag.choices))}" if flag.choices else ""
    text = f"{flag.help} (default: {default}{choices}; env {flag.env})".replace("%", "%%")
    if shown is not None and not flag.name.startswith(shown):
        text = argparse.SUPPRESS
    if flag.kind is bool:
        group.add_argument(
            f"--{flag.name}", action=argparse.BooleanOptionalAction, default=None, help=text
        )
    else:
        metavar = flag.name.rsplit(".", 1)[-1].upper()
        # A list setting may be repeated (--param a=1 --param b=2) or comma-separated.
        action = "append" if flag.kind is tuple else "store"
        group.add_argument(
            f"--{flag.name}", default=None, metavar=metavar, help=text, action=action
        )


def _protocol_help(prog: str, description: str, model: type[BaseModel]) -> str:
    """The ``--help-protocol`` text: the protocol's settings only (no secrets: none are there)."""
    parser = build_parser(prog, description, model, shown=("protocol.",))
    parser.epilog = None
    return parser.format_help()


class _ProtocolHelp(argparse.Action):
    """``--help-protocol``: print the protocol's settings (usually the subnet's file) and exit."""

    def __init__(self, option_strings: list[str], dest: str, text: Callable[[], str]) -> None:
        help_ = (
            "list the protocol's settings (shared by every participant; the subnet's "
            "--config protocol.toml sets them) and exit"
        )
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help_)
        self.text = text

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        print(self.text(), end="")
        parser.exit(0)


def _section(flag: Flag) -> str:
    """The --help heading of a flag: its first dotted part (``node`` for top-level ones)."""
    return flag.name.split(".", 1)[0] if "." in flag.name else "node"


def _section_rank(section: str) -> int:
    """Node sections in ``SECTION_ORDER``, other node sections after them, protocol last
    (a stable sort keeps each section's own order)."""
    if section == "protocol":
        return len(SECTION_ORDER) + 1
    return SECTION_ORDER.index(section) if section in SECTION_ORDER else len(SECTION_ORDER)


def _set(tree: dict, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _merge(base: dict, update: Mapping) -> dict:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _env_value(flag: Flag, raw: str) -> Any:
    if flag.kind is tuple:
        return [part.strip() for part in raw.split(",")]
    if flag.kind is not bool:
        return raw
    if raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    raise ConfigError(f"{flag.env}={raw!r} is not a boolean; use 1/0, true/false or yes/no")


def _file_layers(path: str) -> dict:
    data = load_toml(path)
    protocol = data.pop("protocol", {})
    return {"protocol": protocol, "node": data}


def resolve(
    args: argparse.Namespace,
    env: Mapping[str, str] | None = None,
    model: type[BaseModel] = BeamConfig,
) -> Any:
    """Merge file < environment < flags over the defaults and validate the result."""
    env = os.environ if env is None else env
    tree: dict = _file_layers(args.config) if getattr(args, "config", None) else {}
    flags = list(iter_flags(model))
    for flag in flags:
        if flag.env in env:
            _set(tree, flag.path, _env_value(flag, env[flag.env]))
    given = vars(args)
    for flag in flags:
        value = given.get(flag.name)
        if value is not None:
            if flag.kind is tuple:  # repeated and/or comma-separated
                value = [part for item in value for part in item.split(",")]
            _set(tree, flag.path, value)
    try:
        return model.model_validate(tree)
    except ValidationError as error:
        raise ConfigError(_one_line(error, flags)) from None


def _one_line(error: ValidationError, flags: list[Flag]) -> str:
    """The first problem, named by its flag, e.g. ``--subtensor.network: unknown network ...``."""
    first = error.errors()[0]
    loc = tuple(str(part) for part in first["loc"])
    name = ".".join(loc[1:] if loc and loc[0] == "node" else loc)
    known = {f.name for f in flags}
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "a typo?"
        return f"unknown setting {name!r} ({hint}); see --help for every setting"
    where = f"--{name}" if name in known else name
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def parse_config(
    argv: list[str] | None = None,
    *,
    prog: str = "beam",
    description: str = "",
    env: Mapping[str, str] | None = None,
    model: type[BaseModel] = BeamConfig,
    role: str | None = None,
    shown: tuple[str, ...] | None = None,
    node_title: str = "node",
) -> Any:
    """Parse flags, environment and ``--config`` into a validated config (or ConfigError)."""
    parser = build_parser(prog, description, model, role, shown, node_title)
    return resolve(parser.parse_args(argv), env, model)


def run_guarded(main: Callable[[], int]) -> int:
    """Run an entry point; a configuration or chain-setup problem prints one line, returns 2.

    Used by the scripts and neurons so a wrong network string, a missing wallet or an
    unreachable chain says what is wrong and how to fix it, with no traceback.
    """
    from .errors import SetupError

    try:
        return main()
    except (ConfigError, SetupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
