"""Availability rules and child environments the stacks share (parent side, no imports).

Everything here reads package versions from `HostCapabilities` (collected from package
metadata and a torch-only probe child), so the parent never starts torch, torch_xla,
torchax or JAX to decide whether a stack can run.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable, Optional

from core.config import ExperimentConfig
from core.host.machine import HostCapabilities

#: The first torch_xla release without XLA:CUDA (2.8 was the last to ship it).
XLA_CUDA_REMOVED_IN = (2, 9)

JAX_CUDA_PLUGINS = (
    "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt",
)

PJRT_DEVICES = {"cpu": "CPU", "cuda": "CUDA", "tpu": "TPU"}
JAX_PLATFORMS = {"cpu": "cpu", "cuda": "cuda", "tpu": "tpu"}


def native_accelerator_reason(
    experiment: ExperimentConfig, host: HostCapabilities, stack: str
) -> Optional[str]:
    """Why a torch-native stack cannot run on the experiment's accelerator, or None."""
    if host.torch_version is None:
        return f"{stack} needs PyTorch, which cannot be imported here ({host.torch_error})"
    if experiment.accelerator == "tpu":
        return f"{stack} does not run on TPU; TPUs are driven only through an XLA stack"
    if experiment.accelerator == "cuda" and not host.cuda_available:
        return f"{stack} on cuda needs a CUDA device, and torch {host.torch_version} sees none"
    return None


#: Backends torch registers for its own tests and for its minifier, not for measuring
#: (relu_compile_error_TESTING_ONLY, dynamo_minifier_backend, ...): accepted, never listed.
TEST_ONLY_BACKEND = re.compile(r"TESTING_ONLY|minifier", re.IGNORECASE)


def user_backends(names: Iterable[str]) -> list[str]:
    """The registered dynamo backends a user would pick, sorted: torch's test-only and
    minifier backends left out."""
    return sorted(name for name in names if not TEST_ONLY_BACKEND.search(name))


def unregistered_dynamo_reason(dynamo: str, host: HostCapabilities) -> Optional[str]:
    """Why a dynamo backend name cannot be used here (the probe did not find it), or None:
    the closest registered name first, then the backends a user would pick."""
    if host.dynamo_backends and dynamo not in host.dynamo_backends:
        listed = user_backends(host.dynamo_backends)
        folded = {name.lower(): name for name in listed}
        close = difflib.get_close_matches(dynamo.lower(), list(folded), n=1, cutoff=0.6)
        guess = f"did you mean {folded[close[0]]!r}? " if close else ""
        return (f"dynamo backend {dynamo!r} is not registered in torch {host.torch_version}; "
                f"{guess}backends: {', '.join(listed)}")
    return None


def major_minor(version: Optional[str]) -> Optional[tuple[int, int]]:
    """(major, minor) of a version string such as '2.9.0+cpu', or None if unreadable."""
    if not version:
        return None
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2))


def torch_xla_reason(experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
    """Why PyTorch/XLA (lazy tensor or openxla) cannot run this experiment here, or None."""
    version = host.version_of("torch_xla")
    if version is None:
        return "xla=PJRT needs torch_xla, which is not installed here"
    if host.torch_version is None:
        return f"xla=PJRT needs PyTorch, which cannot be imported here ({host.torch_error})"
    xla_release, torch_release = major_minor(version), major_minor(host.torch_version)
    if xla_release is None or xla_release != torch_release:
        wanted = ".".join(map(str, xla_release)) if xla_release else version
        return (
            f"torch_xla {version} needs torch {wanted}.x, "
            f"but torch {host.torch_version} is installed"
        )
    accelerator = experiment.accelerator
    if accelerator == "cuda":
        if xla_release >= XLA_CUDA_REMOVED_IN:
            return (
                f"XLA:CUDA was removed from torch_xla after 2.8 (installed: {version}); "
                "use --torch-xla2 on CUDA"
            )
        if not host.cuda_available:
            return "xla=PJRT on cuda needs a CUDA device, and none is visible"
    if accelerator == "tpu" and not host.has_tpu():
        return "xla=PJRT on tpu needs libtpu, which is not installed here"
    return None


def torchax_reason(experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
    """Why torchax on JAX cannot run this experiment's accelerator here, or None."""
    mode = experiment.torch_xla2
    missing = [name for name in ("torchax", "jax", "jaxlib") if host.version_of(name) is None]
    if missing:
        return f"torch_xla2={mode} needs {', '.join(missing)}, not installed here"
    if host.torch_version is None:
        return f"torch_xla2={mode} needs PyTorch, which cannot be imported here ({host.torch_error})"
    if experiment.accelerator == "cuda":
        if not any(host.version_of(name) for name in JAX_CUDA_PLUGINS):
            return (
                f"torch_xla2={mode} on cuda needs JAX's CUDA plugin "
                f"({' or '.join(JAX_CUDA_PLUGINS)}), not installed here"
            )
        if not host.cuda_available:
            return f"torch_xla2={mode} on cuda needs a CUDA device, and none is visible"
    if experiment.accelerator == "tpu" and not host.has_tpu():
        return f"torch_xla2={mode} on tpu needs libtpu, which is not installed here"
    return None


def xla_flags_environment(experiment: ExperimentConfig) -> dict[str, str]:
    return {"XLA_FLAGS": experiment.xla_flags} if experiment.xla_flags else {}


def torch_xla_environment(experiment: ExperimentConfig) -> dict[str, str]:
    """Variables a PyTorch/XLA child needs before torch_xla is imported."""
    environment = {"PJRT_DEVICE": PJRT_DEVICES[experiment.accelerator]}
    if not experiment.enable_functionalization:
        environment["XLA_DISABLE_FUNCTIONALIZATION"] = "1"
    environment.update(xla_flags_environment(experiment))
    return environment


def torchax_environment(experiment: ExperimentConfig) -> dict[str, str]:
    """Variables a torchax child needs before JAX is imported."""
    environment = {"JAX_PLATFORMS": JAX_PLATFORMS[experiment.accelerator]}
    environment.update(xla_flags_environment(experiment))
    return environment
