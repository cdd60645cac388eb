"""Model suites. `get_suite(name)` builds one; nothing here imports torch."""

from __future__ import annotations

from models.base import Suite, UnknownModelError, SuiteUnavailableError


class UnknownSuiteError(ValueError):
    """A suite name that does not exist."""


def suite_names() -> tuple[str, ...]:
    return tuple(_factories())


def _factories():
    from models.builtin import BuiltinSuite
    from models.faults import FaultsSuite
    from models.huggingface_suite import HuggingFaceSuite
    from models.timm_suite import TimmSuite
    from models.torchbench import TorchBenchSuite

    return {
        "builtin": BuiltinSuite,
        "faults": FaultsSuite,
        "timm": TimmSuite,
        "huggingface": HuggingFaceSuite,
        "torchbench": TorchBenchSuite,
    }


def get_suite(name: str) -> Suite:
    factories = _factories()
    if name not in factories:
        raise UnknownSuiteError(
            f"unknown suite {name!r}; available suites: {', '.join(factories)}"
        )
    return factories[name]()
