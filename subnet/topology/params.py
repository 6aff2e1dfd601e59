"""Spec parameters: declared with a type and a default, filled by a template, checked before a run.

A spec declares each parameter it takes (``[params.rounds] type = "int", default = 10``). Anywhere
in the spec where a value may vary per run (a slot count, a step parameter, the stop rule, the
outer step), the string ``"$rounds"`` stands for that parameter's value. The compiler fills the
template's values over the defaults, checks each one, and substitutes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, model_validator

from .errors import PlanError

ParamType = Literal["int", "float", "bool", "str", "list[int]", "list[float]", "list[str]"]
PARAM_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_REF = re.compile(r"^\$([a-z][a-z0-9_]{0,47})$")


class ParamSpec(BaseModel):
    """One parameter a spec takes: its type, default, an optional range or choice, and its meaning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ParamType
    default: Any
    doc: str
    # inclusive bounds for numbers (each element of a list of numbers)
    min: StrictInt | StrictFloat | None = None
    max: StrictInt | StrictFloat | None = None
    choices: tuple[Any, ...] | None = None

    @model_validator(mode="after")
    def _default_fits(self) -> ParamSpec:
        check_value("default", self, self.default)
        return self


def _scalar(kind: str, value: Any) -> bool:
    # bool is an int subclass in Python; a TOML `true` must never pass as a count.
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)


def check_value(name: str, spec: ParamSpec, value: Any) -> Any:
    """``value`` checked against ``spec`` and normalised (ints become floats for a float type)."""
    if not finite(value):
        raise PlanError("bad_parameter", f"parameter {name!r} must be finite, got {value!r}")
    kind = spec.type
    element = kind[5:-1] if kind.startswith("list[") else None
    if element is None:
        ok = _scalar(kind, value)
        items = [value]
    else:
        ok = isinstance(value, (list, tuple)) and all(_scalar(element, v) for v in value)
        items = list(value) if ok else []
    if not ok:
        raise PlanError("bad_parameter", f"parameter {name!r} must be {kind}, got {value!r}")
    for item in items:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            if spec.min is not None and item < spec.min:
                raise PlanError(
                    "bad_parameter", f"parameter {name!r} must be >= {spec.min}, got {item!r}"
                )
            if spec.max is not None and item > spec.max:
                raise PlanError(
                    "bad_parameter", f"parameter {name!r} must be <= {spec.max}, got {item!r}"
                )
    if spec.choices is not None and value not in spec.choices:
        raise PlanError(
            "bad_parameter",
            f"parameter {name!r} must be one of {list(spec.choices)}, got {value!r}",
        )
    if kind == "float":
        return float(value)
    if element == "float":
        return tuple(float(v) for v in value)
    return tuple(value) if element else value


def finite(value: Any) -> bool:
    """Whether no float inside ``value`` is NaN or infinite (TOML allows ``nan`` and ``inf``)."""
    if isinstance(value, Mapping):
        return all(finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def resolve(declared: Mapping[str, ParamSpec], given: Mapping[str, Any]) -> dict[str, Any]:
    """The run's parameters: ``given`` over the declared defaults, each checked; unknown ones refused."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise PlanError(
            "bad_parameter", f"unknown parameter {unknown[0]!r} (this topology takes: {known})"
        )
    return {
        name: check_value(name, spec, given[name] if name in given else spec.default)
        for name, spec in sorted(declared.items())
    }


def ref_name(value: Any) -> str | None:
    """The parameter a ``"$name"`` string refers to, or None for any other value."""
    if isinstance(value, str):
        match = _REF.match(value)
        if match:
            return match.group(1)
    return None


def refs(value: Any) -> set[str]:
    """Every parameter referenced anywhere inside ``value`` (nested dicts and lists included)."""
    if isinstance(value, Mapping):
        return set().union(*(refs(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return set().union(*(refs(v) for v in value))
    name = ref_name(value)
    return {name} if name else set()


def substitute(value: Any, params: Mapping[str, Any]) -> Any:
    """``value`` with every ``"$name"`` replaced by ``params[name]`` (names checked at spec load)."""
    if isinstance(value, Mapping):
        return {k: substitute(v, params) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [substitute(v, params) for v in value]
    name = ref_name(value)
    return params[name] if name else value
