"""The one list of the packages whose versions the project records: asked by the parent's
probe (which stacks can run), recorded by every child, keyed into the workload cache (those
a FLOP count depends on) and shown by the dashboard."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Package:
    """A recorded package: its distribution name, and whether a workload's FLOP count depends
    on its version (the model libraries define the networks: child/workload.py)."""

    name: str
    counts: bool = False


PACKAGES = (
    Package("torch", counts=True), Package("torchvision"), Package("torch_xla"),
    Package("torchax"), Package("jax"), Package("jaxlib"), Package("jax-cuda12-plugin"),
    Package("jax-cuda13-plugin"), Package("jax-cuda12-pjrt"), Package("jax-cuda13-pjrt"),
    Package("libtpu"), Package("libtpu-nightly"), Package("triton"),
    Package("timm", counts=True), Package("transformers", counts=True), Package("numpy"),
)
#: Every recorded package's name, in the list's order.
PROBED_PACKAGES = tuple(package.name for package in PACKAGES)
#: The packages a workload's FLOP count (and its cache key) depends on.
COUNTED_PACKAGES = tuple(package.name for package in PACKAGES if package.counts)


def installed_packages() -> dict[str, str]:
    """Versions of the packages that decide which stacks can run (a copy of the first
    answer of this process: a fork server asks once for all its children, which each asked
    again for 5 to 30 ms)."""
    return dict(_installed_packages())


@functools.lru_cache(maxsize=1)
def _installed_packages() -> dict[str, str]:
    found = {}
    for name in PROBED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
