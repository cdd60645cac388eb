"""A debug stack for the verifier's tests: eager on CPU with one result leaf perturbed.

Selected by dynamo="debug_perturb" (no xla, no torch_xla2), and valid only when
EXPERIMENT_RUNNER_DEBUG_STACKS=1. EXPERIMENT_RUNNER_PERTURB_PATH names the leaf as the
verifier renders paths (`output[2]`, `['logits']`, `gradients['layers.0.weight']`);
EXPERIMENT_RUNNER_PERTURB_SCALE is the relative size of the perturbation (default 1e-2).
Without a path the stack is plain eager. Timing runs are not perturbed, only the result
handed to the verifier.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from backends.base import Backend, HostCapabilities, PreparedModel
from backends.eager import native_accelerator_reason
from runner.config import ExperimentConfig, RunSettings

DYNAMO_NAME = "debug_perturb"
DEBUG_STACKS_VAR = "EXPERIMENT_RUNNER_DEBUG_STACKS"
PERTURB_PATH_VAR = "EXPERIMENT_RUNNER_PERTURB_PATH"
PERTURB_SCALE_VAR = "EXPERIMENT_RUNNER_PERTURB_SCALE"
DEFAULT_SCALE = 1e-2


def debug_stacks_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether debug stacks are switched on (EXPERIMENT_RUNNER_DEBUG_STACKS=1)."""
    return (os.environ if environ is None else environ).get(DEBUG_STACKS_VAR) == "1"


def perturb_scale(environ: Mapping[str, str]) -> float:
    """The relative perturbation; ValueError naming a value that is not a positive number."""
    text = environ.get(PERTURB_SCALE_VAR)
    if text is None or text == "":
        return DEFAULT_SCALE
    try:
        scale = float(text)
    except ValueError:
        raise ValueError(f"{PERTURB_SCALE_VAR}={text!r} is not a number") from None
    if not scale > 0:
        raise ValueError(f"{PERTURB_SCALE_VAR}={text!r} must be a positive number")
    return scale


class DebugPerturbBackend(Backend):
    """Eager on CPU; result_to_host perturbs the leaf named by EXPERIMENT_RUNNER_PERTURB_PATH."""

    name = DYNAMO_NAME

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        self._environ = environ

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (
            experiment.dynamo == DYNAMO_NAME
            and experiment.xla is None
            and experiment.torch_xla2 is None
        )

    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        if not debug_stacks_enabled(self.environ):
            return (f"dynamo={DYNAMO_NAME} is a debug stack for the project's tests; "
                    f"it runs only with {DEBUG_STACKS_VAR}=1")
        if experiment.accelerator != "cpu":
            return f"dynamo={DYNAMO_NAME} runs only on cpu, not {experiment.accelerator}"
        try:
            perturb_scale(self.environ)
        except ValueError as exc:
            return str(exc)
        return native_accelerator_reason(experiment, host, f"dynamo={DYNAMO_NAME}")

    def child_environment(
        self, experiment: ExperimentConfig, settings: RunSettings
    ) -> dict[str, str]:
        names = (DEBUG_STACKS_VAR, PERTURB_PATH_VAR, PERTURB_SCALE_VAR)
        return {name: self.environ[name] for name in names if name in self.environ}

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.debug_perturb_model import PerturbingPreparedModel

        path = self.environ.get(PERTURB_PATH_VAR) or None
        return PerturbingPreparedModel(bench, experiment, path, perturb_scale(self.environ))
