"""A debug stack for the verifier's tests: eager on CPU with one result leaf perturbed.

Selected by dynamo="debug_perturb" (no xla, no torch_xla2), and valid only when the parent
runs with EXPERIMENT_RUNNER_DEBUG_STACKS=1. At planning, EXPERIMENT_RUNNER_PERTURB_PATH
(the leaf, as the verifier renders paths: `output[2]`, `['logits']`,
`gradients['layers.0.weight']`), EXPERIMENT_RUNNER_PERTURB_SCALE (the relative size,
default 1e-2) and EXPERIMENT_RUNNER_PERTURB_ELEMENT (a flat index: only that element of a
floating leaf moves, by `scale` of its value) become options of the experiment, so they
reach the child in its spec and are part of the fingerprint. Without a path the stack is
plain eager. Timing runs are not perturbed, only the result handed to the verifier. It
counts as eager for observers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Optional

from backends.availability import native_accelerator_reason
from backends.base import TORCH_PROFILER, Capabilities, PreparedModel, Stack
from core.config import ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities

DYNAMO_NAME = "debug_perturb"
DEBUG_STACKS_VAR = "EXPERIMENT_RUNNER_DEBUG_STACKS"
PERTURB_PATH_VAR = "EXPERIMENT_RUNNER_PERTURB_PATH"
PERTURB_SCALE_VAR = "EXPERIMENT_RUNNER_PERTURB_SCALE"
PERTURB_ELEMENT_VAR = "EXPERIMENT_RUNNER_PERTURB_ELEMENT"
PATH_OPTION = "perturb_path"
SCALE_OPTION = "perturb_scale"
ELEMENT_OPTION = "perturb_element"
DEFAULT_SCALE = 1e-2


def debug_stacks_enabled(environ: Mapping[str, str]) -> bool:
    """Whether debug stacks are switched on (EXPERIMENT_RUNNER_DEBUG_STACKS=1)."""
    return environ.get(DEBUG_STACKS_VAR) == "1"


def perturb_scale(text: Optional[str]) -> float:
    """The relative perturbation; ValueError naming a value that is not a positive number."""
    if text is None or text == "":
        return DEFAULT_SCALE
    try:
        scale = float(text)
    except ValueError:
        raise ValueError(f"{PERTURB_SCALE_VAR}={text!r} is not a number") from None
    if not scale > 0:
        raise ValueError(f"{PERTURB_SCALE_VAR}={text!r} must be a positive number")
    return scale


def perturb_element(text: Optional[str]) -> Optional[int]:
    """The flat index of the one element to perturb, or None (the whole leaf);
    ValueError naming a value that is not a non-negative integer."""
    if text is None or text == "":
        return None
    try:
        index = int(text)
    except ValueError:
        raise ValueError(f"{PERTURB_ELEMENT_VAR}={text!r} is not an integer") from None
    if index < 0:
        raise ValueError(f"{PERTURB_ELEMENT_VAR}={text!r} must not be negative")
    return index


class DebugPerturbStack(Stack):
    """Eager on CPU; the verifier's copy of the result has the named leaf perturbed."""

    name = DYNAMO_NAME
    # Outranks the generic dynamo stack, which would otherwise claim dynamo=debug_perturb.
    priority = 10
    test_only = True
    capabilities = Capabilities(features=frozenset({TORCH_PROFILER}),
                                synchronization="none needed: eager on the CPU")

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        self._environ = environ

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (experiment.dynamo == DYNAMO_NAME and experiment.xla is None
                and experiment.torch_xla2 is None)

    def label(self, experiment: ExperimentConfig) -> str:
        return DYNAMO_NAME

    def planned(self, experiment: ExperimentConfig, environ: Mapping[str, str]) -> ExperimentConfig:
        options = dict(experiment.stack_options)
        for variable, option in ((PERTURB_PATH_VAR, PATH_OPTION), (PERTURB_SCALE_VAR, SCALE_OPTION),
                                 (PERTURB_ELEMENT_VAR, ELEMENT_OPTION)):
            if environ.get(variable):
                options[option] = environ[variable]
        return dataclasses.replace(super().planned(experiment, environ),
                                   stack_options=tuple(sorted(options.items())))

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        if not debug_stacks_enabled(self.environ):
            return (f"dynamo={DYNAMO_NAME} is a debug stack for the project's tests; "
                    f"it runs only with {DEBUG_STACKS_VAR}=1")
        if experiment.accelerator != "cpu":
            return f"dynamo={DYNAMO_NAME} runs only on cpu, not {experiment.accelerator}"
        try:
            perturb_scale(experiment.option(SCALE_OPTION))
            perturb_element(experiment.option(ELEMENT_OPTION))
        except ValueError as error:
            return str(error)
        return native_accelerator_reason(experiment, host, f"dynamo={DYNAMO_NAME}")

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.runtimes.perturb import PerturbingPreparedModel

        return PerturbingPreparedModel(bench, experiment, experiment.option(PATH_OPTION),
                                       perturb_scale(experiment.option(SCALE_OPTION)),
                                       perturb_element(experiment.option(ELEMENT_OPTION)))


STACK = DebugPerturbStack()
