"""What this machine offers: produced by the runner's probe, read by the stacks' rules."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional


def cache_root() -> Path:
    """The project's folder in the user's cache: $XDG_CACHE_HOME/experiment-runner, else
    ~/.cache/experiment-runner."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "experiment-runner"


def cpu_model_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), as the children report it too."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class HostCapabilities:
    """What the probe child found on this machine (see runner/plan/probe.py)."""

    python: str = ""
    torch_version: Optional[str] = None
    cuda_available: bool = False
    cuda_device_names: tuple[str, ...] = ()
    dynamo_backends: tuple[str, ...] = ()
    packages: dict[str, str] = field(default_factory=dict)
    torch_error: Optional[str] = None
    #: Variables every child gets from what the probe established once for this host, so
    #: that no child repeats the check (see runner/plan/probe.py: compiler_checks).
    child_environment: dict[str, str] = field(default_factory=dict)
    #: Whether the probe made those checks (they are made only for a sweep that may compile
    #: on the CPU with inductor: runner/plan/probe.py, `compiles_on_cpu`).
    compiler_checked: bool = False
    #: The top-level modules the probe child had imported when it answered: a folder on the
    #: import path that holds none of them left the answer as it is (core/host/import_folders.py).
    top_level_modules: tuple[str, ...] = ()

    def version_of(self, package: str) -> Optional[str]:
        return self.packages.get(package)

    def has_tpu(self) -> bool:
        return "libtpu" in self.packages or "libtpu-nightly" in self.packages

    def accelerator_model(self, accelerator: str) -> Optional[str]:
        """The device an experiment on `accelerator` uses, as far as the parent knows it:
        the CPU's model name, the first CUDA device's name, or "TPU"; None when unknown.

        Lines whose child never reported a device (skipped, failed early) carry this."""
        if accelerator == "cpu":
            return cpu_model_name()
        if accelerator == "cuda" and self.cuda_device_names:
            return self.cuda_device_names[0]
        if accelerator == "tpu" and self.has_tpu():
            return "TPU"
        return None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HostCapabilities":
        return cls(
            python=data.get("python", ""),
            torch_version=data.get("torch_version"),
            cuda_available=bool(data.get("cuda_available")),
            cuda_device_names=tuple(data.get("cuda_device_names", ())),
            dynamo_backends=tuple(data.get("dynamo_backends", ())),
            packages=dict(data.get("packages", {})),
            torch_error=data.get("torch_error"),
            child_environment={str(name): str(value) for name, value
                               in dict(data.get("child_environment") or {}).items()},
            # answers kept before the checks became optional made them whenever they could
            compiler_checked=bool(data.get("compiler_checked", "child_environment" in data)),
            top_level_modules=tuple(data.get("top_level_modules", ())),
        )
