"""The versions of the packages that decide which stacks can run: asked by the parent's probe
and recorded by every child."""

from __future__ import annotations

from importlib import metadata

PROBED_PACKAGES = (
    "torch", "torchvision", "torch_xla", "torchax", "jax", "jaxlib",
    "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt",
    "libtpu", "libtpu-nightly", "timm", "transformers", "numpy",
)


def installed_packages() -> dict[str, str]:
    """Versions of the packages that decide which stacks can run."""
    found = {}
    for name in PROBED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
