"""A template: which topology a run uses, bound by exact version, and its parameters."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import PlanError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_REF = re.compile(
    r"^(@[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9-]*)@((?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*))$"
)


def parse_ref(ref: str) -> tuple[str, str]:
    """``"@beam/fedavg@1.0.0"`` -> ``("@beam/fedavg", "1.0.0")``; PlanError for anything looser.

    Only exact versions bind: no ranges, no "latest", so every member of a run compiles the
    same spec.
    """
    match = _REF.match(ref) if isinstance(ref, str) else None
    if not match:
        raise PlanError(
            "bad_reference", f"{ref!r} is not an exact topology reference like '@beam/fedavg@1.0.0'"
        )
    return match.group(1), match.group(2)


class Template(BaseModel):
    """Binds a topology by exact version (``"@beam/fedavg@1.0.0"``) plus parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topology: str
    params: dict[str, Any] = Field(default_factory=dict)


def template_from_file(path: str | Path) -> Template:
    """A template from a TOML file: ``topology = "@beam/fedavg@1.0.0"`` and a ``[params]`` table.

    PlanError ``bad_template`` (one line naming the file) if it is missing or malformed, and
    ``bad_reference`` if the topology is not an exact reference.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError("bad_template", f"template file {path} not found") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise PlanError("bad_template", f"{path}: {error}") from None
    try:
        template = Template.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "template"
        raise PlanError("bad_template", f"{path}: {where}: {first['msg']}") from None
    parse_ref(template.topology)
    return template
