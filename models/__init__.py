"""Model suites. `get_suite(name)` builds one; nothing here imports torch.

Suites are found at call time: every module of models/suites/ exposes its Suite subclass
as `SUITE`, and the module's name is the suite's name.
"""

from __future__ import annotations

from typing import Optional

from core.plugins import discover
from models.base import Suite, SuiteUnavailableError, UnknownModelError


class UnknownSuiteError(ValueError):
    """A suite name that does not exist."""


def suite_names() -> tuple[str, ...]:
    """Every suite, ordered by the classes' `order`, then by name."""
    return tuple(_suite_classes())


def _suite_classes() -> dict[str, type[Suite]]:
    found = discover("models.suites", "SUITE")
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def get_suite(
    name: str, *, reduced: bool = False, torchbench_dir: Optional[str] = None
) -> Suite:
    """The suite called `name`, with reduced models or not; `torchbench_dir` locates a
    TorchBench checkout. The caller reads any environment setting and passes it here."""
    classes = _suite_classes()
    if name not in classes:
        raise UnknownSuiteError(
            f"unknown suite {name!r}; available suites: {', '.join(classes)}"
        )
    return classes[name](reduced=reduced, torchbench_dir=torchbench_dir)


def suite_preload(name: str) -> tuple[str, ...]:
    """The libraries suite `name`'s models import (Suite.preload), and its builder module
    where it has one; () for an unknown suite."""
    found = _suite_classes().get(name)
    if found is None:
        return ()
    builder = getattr(found, "builder", "")  # a builder suite's models come from one module
    return (*found.preload, *((f"models.builders.{builder}",) if builder else ()))
