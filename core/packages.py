"""The versions of the packages that decide which stacks can run: asked by the parent's probe
and recorded by every child."""

from __future__ import annotations

import functools
from importlib import metadata

PROBED_PACKAGES = (
    "torch", "torchvision", "torch_xla", "torchax", "jax", "jaxlib",
    "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt",
    "libtpu", "libtpu-nightly", "timm", "transformers", "numpy",
)


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
