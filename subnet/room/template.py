"""What ``room run`` and ``demo_room.py`` start: a template from ``--template`` and ``--param``.

``--template`` is a template file or an exact topology reference (``@beam/gossip-ring@1.0.0``);
each ``--param KEY=VALUE`` sets one of the topology's parameters, typed by its spec (``int``,
``float``, ``bool``, ``str`` or a comma-separated list), over what the file set.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..topology import Template, load_spec, template_from_file
from ..topology.spec import TopologySpec

_BOOLS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def read_template(ref: str, params: Iterable[str] = ()) -> Template:
    """A Template from ``--template`` (a file or an exact reference) and ``--param`` items."""
    if not ref:
        raise ConfigError(
            "--template is required: a FILE.toml or @beam/NAME@VERSION (docs/topologies.md lists "
            "them)"
        )
    if ref.startswith("@"):
        template = Template(topology=ref)
    elif Path(ref).exists():
        template = template_from_file(ref)
    else:
        raise ConfigError(f"--template {ref}: no such file; or name a topology as @beam/NAME@X.Y.Z")
    items = list(params)
    if not items:
        return template
    spec = load_spec(template.topology)
    merged = {**template.params, **parse_params(spec, items)}
    return Template(topology=template.topology, params=merged)


def parse_params(spec: TopologySpec, items: Iterable[str]) -> dict[str, Any]:
    """``["rounds=3", "points=0.1,0.2"]`` -> typed values for ``spec``'s parameters; a
    ConfigError naming the parameters it takes for anything else."""
    out: dict[str, Any] = {}
    known = ", ".join(sorted(spec.params)) or "none"
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: use KEY=VALUE, e.g. rounds=3")
        if key not in spec.params:
            raise ConfigError(
                f"--param {key}: {spec.ref} takes no such parameter; it takes {known}"
            )
        out[key] = _typed(key, spec.params[key].type, raw.strip())
    return out


def _typed(key: str, kind: str, raw: str) -> Any:
    element = kind[5:-1] if kind.startswith("list[") else None
    try:
        if element is not None:
            return [_scalar(element, part.strip()) for part in raw.split(",") if part.strip()]
        return _scalar(kind, raw)
    except (ValueError, KeyError):
        raise ConfigError(f"--param {key}={raw}: not a {kind}") from None


def _scalar(kind: str, raw: str) -> Any:
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "bool":
        return _BOOLS[raw.lower()]
    return raw
