"""Expand the experiment matrix, drop invalid combinations with a reason, filter, partition."""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import backends
from core.config import (
    ACCELERATORS,
    DEFAULT_DYNAMO,
    DEFAULT_SEED,
    TESTS,
    TORCH_XLA2_MODES,
    XLA_MODES,
    ExperimentConfig,
    ModelConfig,
    experiment_id,
    fingerprint,
)
from core.host import HostCapabilities
from models.base import Suite

log = logging.getLogger(__name__)


class MatrixError(ValueError):
    """A request that yields nothing to run, or that cannot be understood."""


@dataclass(frozen=True)
class MatrixRequest:
    """The dimensions the user asked for; None means 'every value valid here'."""

    accelerators: Optional[tuple[str, ...]] = None
    xla: Optional[tuple[Optional[str], ...]] = None
    dynamo: Optional[tuple[Optional[str], ...]] = None
    torch_xla2: Optional[tuple[Optional[str], ...]] = None
    tests: Optional[tuple[str, ...]] = None
    precisions: tuple[str, ...] = ("fp32",)
    batch_sizes: tuple[Optional[int], ...] = (None,)
    xla_flags: tuple[Optional[str], ...] = (None,)
    filters: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    matmul_precision: str = "highest"
    enable_functionalization: bool = False
    optimizer: Optional[str] = None
    amp_dtype: Optional[str] = None
    total_partitions: int = 1
    partition_id: int = 0
    #: Suite options, recorded in every ModelConfig.
    reduced: bool = False
    torchbench_dir: Optional[str] = None
    #: The seed of weights and inputs (RunSettings.seed), part of every fingerprint.
    seed: int = DEFAULT_SEED


@dataclass(frozen=True)
class PlannedConfiguration:
    """A valid configuration, its stack picked: `experiment.stack` names it."""

    experiment: ExperimentConfig
    label: str


@dataclass(frozen=True)
class PlannedExperiment:
    """One experiment to run: a model and a valid configuration on its stack."""

    model: ModelConfig
    experiment: ExperimentConfig
    #: The stack's label for this experiment, e.g. 'inductor' or 'PJRT+openxla'.
    label: str
    seed: int = DEFAULT_SEED

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.model, self.experiment, self.seed)

    @property
    def experiment_id(self) -> str:
        return experiment_id(self.model, self.experiment, self.label, self.seed)


@dataclass(frozen=True)
class DroppedCombination:
    """A configuration left out (for every model) and why."""

    experiment: ExperimentConfig
    reason: str


@dataclass
class Plan:
    """What will run, what was left out and why, and what results already hold."""

    experiments: list[PlannedExperiment] = field(default_factory=list)
    dropped: list[DroppedCombination] = field(default_factory=list)
    already_recorded: list[PlannedExperiment] = field(default_factory=list)
    model_names: list[str] = field(default_factory=list)

    def dropped_summary(self) -> list[str]:
        """One line per distinct reason, with how many configurations it left out."""
        counts = Counter(d.reason for d in self.dropped)
        return [f"{count} configuration(s): {reason}" for reason, count in counts.items()]


def compile_patterns(patterns: Sequence[str], flag: str) -> list[re.Pattern]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as error:
            raise MatrixError(f"{flag} {pattern!r} is not a valid regular expression: {error}")
    return compiled


def select_models(suite: Suite, filters: Sequence[str], excludes: Sequence[str]) -> list[str]:
    """Model names matching any --filter (all when none) and no --exclude."""
    keep = compile_patterns(filters, "--filter")
    drop = compile_patterns(excludes, "--exclude")
    names = [
        name
        for name in suite.model_names()
        if (not keep or any(p.search(name) for p in keep))
        and not any(p.search(name) for p in drop)
    ]
    if not names:
        raise MatrixError(
            f"no model of suite {suite.name!r} matches "
            f"--filter {list(filters) or '(none)'} and --exclude {list(excludes) or '(none)'}; "
            f"its models are: {', '.join(suite.model_names())}"
        )
    return names


def default_accelerators(host: HostCapabilities) -> tuple[str, ...]:
    found = ["cpu"]
    if host.cuda_available:
        found.append("cuda")
    if host.has_tpu():
        found.append("tpu")
    return tuple(found)


def default_torch_xla2(request: MatrixRequest) -> tuple[Optional[str], ...]:
    """torchax modes join an unset dimension only when --xla and --dynamo are unset too,
    so seed 003's examples (which name xla and dynamo) expand exactly as documented there."""
    if request.xla is None and request.dynamo is None:
        return TORCH_XLA2_MODES
    return (None,)


def expand_configurations(
    request: MatrixRequest, host: HostCapabilities, environ: Optional[Mapping[str, str]] = None,
) -> tuple[list[PlannedConfiguration], list[DroppedCombination]]:
    """Every combination of the requested dimensions, split into valid and dropped.

    Each valid one has its stack picked here, once; `environ` (the parent's environment by
    default) is where debug stacks read their options.
    """
    environ = os.environ if environ is None else environ
    dimensions = {
        "accelerator": request.accelerators or default_accelerators(host),
        "xla": request.xla if request.xla is not None else XLA_MODES,
        "dynamo": request.dynamo if request.dynamo is not None else DEFAULT_DYNAMO,
        "torch_xla2": request.torch_xla2
        if request.torch_xla2 is not None
        else default_torch_xla2(request),
        "test": request.tests or TESTS,
        "precision": request.precisions,
        "batch_size": request.batch_sizes,
        "xla_flags": request.xla_flags,
    }
    valid, dropped = [], []
    for values in itertools.product(*dimensions.values()):
        experiment = ExperimentConfig(
            **dict(zip(dimensions, values)),
            matmul_precision=request.matmul_precision,
            enable_functionalization=request.enable_functionalization,
            optimizer=request.optimizer,
            amp_dtype=request.amp_dtype,
        )
        if experiment.xla_flags and experiment.xla is None and experiment.torch_xla2 is None:
            # XLA flags mean nothing to a stack without XLA: run it once, without flags.
            continue
        stack = backends.stack_for(experiment)
        if stack is None:
            dropped.append(DroppedCombination(experiment, backends.no_stack_reason(experiment)))
            continue
        experiment = stack.planned(experiment, environ)
        reason = stack.invalid_reason(experiment, host)
        if reason:
            dropped.append(DroppedCombination(experiment, reason))
        else:
            valid.append(PlannedConfiguration(experiment, stack.label(experiment)))
    return list(dict.fromkeys(valid)), dropped


def build_plan(
    suite: Suite,
    request: MatrixRequest,
    host: HostCapabilities,
    recorded: frozenset[str] = frozenset(),
    environ: Optional[Mapping[str, str]] = None,
) -> Plan:
    """The experiments to run for `request`, in a stable order."""
    if request.total_partitions < 1:
        raise MatrixError(f"--total-partitions must be at least 1, got {request.total_partitions}")
    if not 0 <= request.partition_id < request.total_partitions:
        raise MatrixError(
            f"--partition-id must be in [0, {request.total_partitions}), "
            f"got {request.partition_id}"
        )
    for accelerator in request.accelerators or ():
        if accelerator not in ACCELERATORS:
            raise MatrixError(
                f"--accelerator {accelerator!r} is unknown; expected one of {', '.join(ACCELERATORS)}"
            )
    names = select_models(suite, request.filters, request.excludes)
    configurations, dropped = expand_configurations(request, host, environ)
    plan = Plan(dropped=dropped, model_names=names)
    if not configurations:
        reasons = "; ".join(sorted({d.reason for d in dropped})) or "the matrix is empty"
        raise MatrixError(f"no requested combination can run here: {reasons}")
    everything = [
        PlannedExperiment(
            ModelConfig(suite.name, name, reduced=request.reduced,
                        torchbench_dir=request.torchbench_dir),
            configuration.experiment, configuration.label, request.seed)
        for name in names
        for configuration in configurations
    ]
    mine = everything[request.partition_id :: request.total_partitions]
    for planned in mine:
        if planned.fingerprint in recorded:
            plan.already_recorded.append(planned)
        else:
            plan.experiments.append(planned)
    return plan

