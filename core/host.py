"""What this machine offers: produced by the runner's probe, read by the stacks' rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class HostCapabilities:
    """What the probe child found on this machine (see runner/probe.py)."""

    python: str = ""
    torch_version: Optional[str] = None
    cuda_available: bool = False
    cuda_device_names: tuple[str, ...] = ()
    dynamo_backends: tuple[str, ...] = ()
    packages: dict[str, str] = field(default_factory=dict)
    torch_error: Optional[str] = None

    def version_of(self, package: str) -> Optional[str]:
        return self.packages.get(package)

    def has_tpu(self) -> bool:
        return "libtpu" in self.packages or "libtpu-nightly" in self.packages

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
        )
