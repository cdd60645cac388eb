"""Execution stacks. `all_backends()` lists them; `backend_for` picks the owner."""

from __future__ import annotations

from typing import Optional

from backends.base import Backend, HostCapabilities
from runner.config import ExperimentConfig


def all_backends() -> tuple[Backend, ...]:
    """Every backend, in the order they are asked whether they own a combination."""
    from backends.debug_perturb import DebugPerturbBackend, debug_stacks_enabled
    from backends.dynamo import DynamoBackend
    from backends.eager import EagerBackend
    from backends.openxla import OpenXlaBackend
    from backends.torchax import TorchaxBackend
    from backends.xla_lazy import XlaLazyBackend

    debug = (DebugPerturbBackend(),) if debug_stacks_enabled() else ()
    return (TorchaxBackend(), XlaLazyBackend(), OpenXlaBackend(), EagerBackend(), *debug,
            DynamoBackend())


def backend_for(experiment: ExperimentConfig) -> Optional[Backend]:
    """The backend that owns this combination, or None when none does."""
    for backend in all_backends():
        if backend.handles(experiment):
            return backend
    return None


def invalid_reason(experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
    """Why the combination cannot run here, or None when it can."""
    backend = backend_for(experiment)
    if backend is None:
        return no_backend_reason(experiment)
    return backend.invalid_reason(experiment, host)


def no_backend_reason(experiment: ExperimentConfig) -> str:
    if experiment.torch_xla2 is not None:
        return f"torch_xla2={experiment.torch_xla2} has no backend in this version"
    if experiment.xla is not None:
        return f"xla={experiment.xla} has no backend in this version"
    return f"no backend runs {experiment.describe()}"
