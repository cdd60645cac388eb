"""Find out what this machine can run, in a child process.

The parent must not start runtimes, and importing torch costs seconds, so one small child
imports torch (never torch_xla, torchax or jax) and reports versions, CUDA devices and the
registered dynamo backends as JSON. Package versions come from metadata, without importing.
"""

from __future__ import annotations

import json
import logging
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from core.host import HostCapabilities

log = logging.getLogger(__name__)

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


def probe_in_this_process() -> dict[str, Any]:
    """The probe's answer (run inside the probe child)."""
    answer: dict[str, Any] = {"python": platform.python_version(), "packages": installed_packages()}
    try:
        import torch
    except Exception as error:  # a broken torch is reported, not raised
        answer["torch_error"] = f"{type(error).__name__}: {error}"
        return answer
    answer["torch_version"] = torch.__version__
    answer["cuda_available"] = bool(torch.cuda.is_available())
    if answer["cuda_available"]:
        answer["cuda_device_names"] = [
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
        ]
    try:
        answer["dynamo_backends"] = sorted(torch._dynamo.list_backends(exclude_tags=()))
    except Exception as error:
        log.debug("dynamo backends unknown: %s", error)
    return answer


def probe_host(timeout: float = 300.0) -> HostCapabilities:
    """Run the probe child and parse its answer; failures give a torch-less answer."""
    command = [sys.executable, "-m", "runner.probe"]
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return HostCapabilities(
            packages=installed_packages(), torch_error=f"the probe took over {timeout:.0f} s"
        )
    try:
        return HostCapabilities.from_dict(json.loads(completed.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        tail = completed.stderr.strip()[-500:]
        return HostCapabilities(
            packages=installed_packages(),
            torch_error=f"the probe exited with {completed.returncode}: {tail}",
        )


if __name__ == "__main__":
    print(json.dumps(probe_in_this_process()))
