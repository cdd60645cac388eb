"""Plug-in discovery: the registries of stacks, suites and observers are folders of modules."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any


def discover(package: str, attribute: str) -> dict[str, Any]:
    """`attribute` of every module of `package` that defines it, by module name.

    Modules are imported at call time, never when the registry itself is imported.
    """
    found = {}
    for module_info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{module_info.name}")
        if hasattr(module, attribute):
            found[module_info.name] = getattr(module, attribute)
    return found
