"""Model suites. `get_suite(name)` builds one; nothing here imports torch."""

from __future__ import annotations

from typing import Optional

from models.base import Suite, UnknownModelError, SuiteUnavailableError


class UnknownSuiteError(ValueError):
    """A suite name that does not exist."""


def suite_names() -> tuple[str, ...]:
    return tuple(_factories())


def _factories():
    from models.suites.builtin import BuiltinSuite
    from models.suites.faults import FaultsSuite
    from models.suites.huggingface import HuggingFaceSuite
    from models.suites.timm import TimmSuite
    from models.suites.torchbench import TorchBenchSuite

    return {
        "builtin": BuiltinSuite,
        "faults": FaultsSuite,
        "timm": TimmSuite,
        "huggingface": HuggingFaceSuite,
        "torchbench": TorchBenchSuite,
    }


def get_suite(name: str, torchbench_dir: Optional[str] = None) -> Suite:
    """The suite called `name`; `torchbench_dir` locates a TorchBench checkout."""
    factories = _factories()
    if name not in factories:
        raise UnknownSuiteError(
            f"unknown suite {name!r}; available suites: {', '.join(factories)}"
        )
    if name == "torchbench":
        return factories[name](torchbench_dir=torchbench_dir)
    return factories[name]()
