"""Lazy package exports: a package ``__init__`` that names its public items without importing
the modules that define them until one is used (PEP 562).

``subnet.config`` needs only the small pydantic config modules of ``compression``, ``scoring``
and ``training``; importing those packages eagerly pulled in torch (about 2 s), which every
``--help`` and every room command paid for nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str, modules: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` exporting ``modules``' names
    (``{"base": ["Compressor", ...]}``: the names ``package.base`` defines)."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        importlib.import_module(package).__dict__[name] = value  # looked up once
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
