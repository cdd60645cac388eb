"""Expand the experiment matrix, drop invalid combinations with a reason, filter, partition.

Models are chosen as in PyTorch/XLA's runner: the suite's model list is cut into contiguous
partitions (--total-partitions, --partition-id), and the partition's models that match the
filters (--filter, --exclude, --filter-by-tier, --exclude-by-tier) run every valid
configuration, model by model. `single_plan` plans exactly one experiment from the JSON of
--model-config and --experiment-config.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import regex

import backends
from core.files import strict_json
from core.config import (
    DEFAULT_DYNAMO,
    ExperimentConfig,
    ModelConfig,
    experiment_id,
    experiment_identity_dict,
    fingerprint,
)
from core.fields import (
    ACCELERATORS,
    EXPERIMENT,
    MODEL,
    TESTS,
    XLA_MODES,
    Field,
    FieldError,
    field_named,
    fields_of,
    parse_config,
)
from core.host.machine import HostCapabilities
from models.base import Suite

log = logging.getLogger(__name__)


class MatrixError(ValueError):
    """A request that yields nothing to run, or that cannot be understood."""


@dataclass(frozen=True)
class MatrixRequest:
    """What the user asked for.

    `dimensions` holds the values asked for of each dimension of the matrix, by field name
    (core.fields: the fields with `dimension`); a dimension not named takes every value valid
    here (accelerators present, xla, dynamo, tests) or its default. `values` holds the
    other experiment fields that were set (switches, the seed, ...), by field name.
    """

    dimensions: Mapping[str, tuple] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    filters: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    #: TorchBench tiers (--filter-by-tier, --exclude-by-tier), as the suite defines them.
    filter_tiers: tuple[int, ...] = ()
    exclude_tiers: tuple[int, ...] = ()
    total_partitions: int = 1
    partition_id: int = 0
    #: Suite options, recorded in every ModelConfig.
    reduced: bool = False
    torchbench_dir: Optional[str] = None

    @classmethod
    def of(cls, **given: Any) -> "MatrixRequest":
        """A request from keywords: experiment field names (a tuple of values for a
        dimension, a value otherwise) and this class's own options (filters, ...)."""
        experiment_names = {spec.name for spec in fields_of(EXPERIMENT)}
        dimensions = {name: tuple(value) for name, value in given.items()
                      if name in experiment_names and field_named(EXPERIMENT, name).dimension}
        values = {name: value for name, value in given.items()
                  if name in experiment_names and name not in dimensions}
        options = {name: value for name, value in given.items() if name not in experiment_names}
        return cls(dimensions=dimensions, values=values, **options)

    def __post_init__(self) -> None:
        for name in self.dimensions:
            if not field_named(EXPERIMENT, name).dimension:
                raise MatrixError(f"{name} is not a dimension of the matrix")
        for name in self.values:
            if field_named(EXPERIMENT, name).dimension:
                raise MatrixError(f"{name} is a dimension of the matrix: give it in dimensions")


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

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.model, self.experiment)

    @property
    def experiment_id(self) -> str:
        return experiment_id(self.model, self.experiment, self.label)


@dataclass(frozen=True)
class DroppedCombination:
    """A configuration left out (for every model) and why."""

    experiment: ExperimentConfig
    reason: str
    #: The values it holds of the dimensions the user named (flag order), as asked for.
    asked: tuple[tuple[str, Any], ...] = ()
    #: True when no valid configuration holds those values: something the user asked for
    #: cannot run. False for a combination that only the expansion of unset dimensions made.
    refused: bool = False
    #: How many dimensions the user left unset are away from their first value (eager, eval):
    #: the fewer, the closer the combination is to what was asked, and the more its reason
    #: says why the request cannot run.
    detour: int = 0

    def asked_text(self) -> str:
        """The named values, e.g. 'accelerator=cuda dynamo=inductor' ('' when none)."""
        return " ".join(f"{name}={value}" for name, value in self.asked)


@dataclass(frozen=True)
class Refusal:
    """Values the user asked for that no valid configuration holds, with the reason of the
    combination closest to them and how many combinations were left out for them."""

    asked: str
    reason: str
    combinations: int

    def describe(self) -> str:
        return f"{self.asked}: {self.reason}" if self.asked else self.reason


def refusals(dropped: Sequence[DroppedCombination]) -> list[Refusal]:
    """One Refusal per distinct request that cannot run, in the order they first appear."""
    groups: dict[str, list[DroppedCombination]] = {}
    for combination in dropped:
        if combination.refused:
            groups.setdefault(combination.asked_text(), []).append(combination)
    return [Refusal(asked, min(members, key=lambda d: d.detour).reason, len(members))
            for asked, members in groups.items()]


@dataclass
class Plan:
    """What will run, what was left out and why, and what results already hold."""

    experiments: list[PlannedExperiment] = field(default_factory=list)
    dropped: list[DroppedCombination] = field(default_factory=list)
    already_recorded: list[PlannedExperiment] = field(default_factory=list)
    model_names: list[str] = field(default_factory=list)
    #: How many valid configurations each model runs.
    configuration_count: int = 0
    #: Every experiment the request names, to run or already recorded, in the plan's order
    #: (model by model, configurations in the matrix's order): the same from run to run.
    requested: list[PlannedExperiment] = field(default_factory=list)

    def asks_for(self, accelerator: str) -> bool:
        """Whether the sweep asks for an experiment on `accelerator`, to run or already
        recorded (a resumed sweep whose experiments are all recorded still asked for them)."""
        return any(planned.experiment.accelerator == accelerator
                   for planned in (*self.experiments, *self.already_recorded))

    def refusals(self) -> list["Refusal"]:
        """What the user asked for that cannot run here (see `refusals`)."""
        return refusals(self.dropped)


#: How much of a value a message shows.
SHOWN_CHARACTERS = 80


def shown_value(text: str) -> str:
    """`text` as a message shows it: at most SHOWN_CHARACTERS, then how much more there is."""
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_CHARACTERS]}... ({len(text) - SHOWN_CHARACTERS} more characters)"


def shown_list(values: Sequence[str]) -> str:
    return str([shown_value(value) for value in values]) if values else "(none)"


#: How long one --filter or --exclude pattern may take to match one model name: a name is a
#: few dozen characters, which any sane pattern matches in microseconds; a pattern with
#: catastrophic backtracking ((a+)+$ and the like) would take years.
MATCH_SECONDS = 1.0


def compile_patterns(patterns: Sequence[str], flag: str) -> list[regex.Pattern]:
    """The patterns of `flag` (Python's `re` syntax), compiled case-insensitively with the
    `regex` engine in its `re`-compatible mode, which bounds a match by a time limit
    (`pattern_matches`); MatrixError naming one that is no regular expression."""
    compiled = []
    for pattern in patterns:
        try:
            re.compile(pattern)  # Python's own syntax and words for what is wrong with it
            compiled.append(regex.compile(pattern, regex.IGNORECASE | regex.VERSION0))
        except (re.error, regex.error, OverflowError, RecursionError, ValueError) as error:
            # Python's compiler raises OverflowError for a huge repetition count and
            # RecursionError for deep nesting, besides re.error.
            reason = str(error) if not isinstance(error, RecursionError) else "nested too deeply"
            raise MatrixError(f"{flag} {shown_value(pattern)!r} is not a valid regular "
                              f"expression: {reason}") from None
    return compiled


def pattern_matches(pattern: regex.Pattern, name: str, flag: str) -> bool:
    """Whether `pattern` matches part of `name`; MatrixError naming the pattern when the
    match takes longer than MATCH_SECONDS (catastrophic backtracking)."""
    try:
        return pattern.search(name, timeout=MATCH_SECONDS) is not None
    except TimeoutError:
        raise MatrixError(
            f"{flag} {shown_value(pattern.pattern)!r} took more than {MATCH_SECONDS:g} s to "
            f"match the model name {shown_value(name)!r}: the pattern backtracks without end "
            "(nested repetitions such as (a+)+); write it without them") from None


def tier_names(suite: Suite, tiers: Sequence[int], flag: str) -> set[str]:
    """The (case-folded) names of the models in the suite's `tiers`."""
    if not tiers:
        return set()
    defined = suite.tiers()
    if not defined:
        raise MatrixError(f"{flag}: suite {suite.name!r} has no tiers; tiers are TorchBench's "
                          "(--suite-name=torchbench)")
    unknown = [tier for tier in tiers if tier not in defined]
    if unknown:
        raise MatrixError(f"{flag} {unknown[0]} is not a tier of suite {suite.name!r}; its tiers "
                          f"are {', '.join(map(str, sorted(defined)))}")
    return {name.casefold() for tier in tiers for name in defined[tier]}


def select_models(suite: Suite, filters: Sequence[str], excludes: Sequence[str],
                  filter_tiers: Sequence[int] = (), exclude_tiers: Sequence[int] = ()) -> list[str]:
    """Model names matching any --filter or --filter-by-tier (all when neither is given),
    and neither an --exclude nor an --exclude-by-tier. Tiers match whole names, ignoring
    case, as PyTorch/XLA's runner does."""
    keep = compile_patterns(filters, "--filter")
    drop = compile_patterns(excludes, "--exclude")
    keep_tiers = tier_names(suite, filter_tiers, "--filter-by-tier")
    drop_tiers = tier_names(suite, exclude_tiers, "--exclude-by-tier")
    selecting = bool(keep or filter_tiers)
    every = suite.model_names()
    kept_by = [[name for name in every if pattern_matches(pattern, name, "--filter")]
               for pattern in keep]
    chosen = {name for found in kept_by for name in found}
    names = [
        name
        for name in every
        if (not selecting or name in chosen or name.casefold() in keep_tiers)
        and not any(pattern_matches(p, name, "--exclude") for p in drop)
        and name.casefold() not in drop_tiers
    ]
    if names:
        for pattern, found in zip(filters, kept_by):
            if not found:
                log.warning("--filter %r matches no model of suite %r; it selects nothing",
                            shown_value(pattern), suite.name)
    if not names:
        tiers = ""
        if filter_tiers or exclude_tiers:
            tiers = (f", --filter-by-tier {list(filter_tiers) or '(none)'} and --exclude-by-tier "
                     f"{list(exclude_tiers) or '(none)'}")
        raise MatrixError(
            f"no model of suite {suite.name!r} matches "
            f"--filter {shown_list(filters)} and --exclude {shown_list(excludes)}"
            f"{tiers}; its models are: {', '.join(suite.model_names())}"
        )
    return names


def partition_bounds(count: int, total_partitions: int, partition_id: int) -> tuple[int, int]:
    """[start, end) of partition `partition_id` of `count` models, as PyTorch/XLA's runner
    cuts them: `count // total_partitions` models each, the last one taking the rest."""
    size = count // total_partitions
    start = partition_id * size
    end = start + size if partition_id < total_partitions - 1 else count
    return start, end


def partition_models(suite: Suite, total_partitions: int, partition_id: int) -> list[str]:
    """The suite's models in partition `partition_id` (before any filter)."""
    names = suite.model_names()
    start, end = partition_bounds(len(names), total_partitions, partition_id)
    return names[start:end]


def default_accelerators(host: HostCapabilities) -> tuple[str, ...]:
    found = ["cpu"]
    if host.cuda_available:
        found.append("cuda")
    if host.has_tpu():
        found.append("tpu")
    return tuple(found)


def unset_dimension(spec: Field, host: HostCapabilities) -> tuple:
    """The values of a dimension the user left unset: every value valid here for the
    stack's dimensions and the test; the field's default elsewhere. torchax modes run only
    when --torch-xla2 asks for them, as in PyTorch/XLA's runner, so its documented examples
    expand exactly as documented there."""
    every = {"accelerator": lambda: default_accelerators(host), "xla": lambda: XLA_MODES,
             "dynamo": lambda: DEFAULT_DYNAMO, "torch_xla2": lambda: (None,),
             "test": lambda: TESTS}
    if spec.name in every:
        return tuple(every[spec.name]())
    return spec.sweep_default or (spec.default,)


def where_it_applies(experiment: ExperimentConfig) -> ExperimentConfig:
    """The experiment with each field that does not apply to it (core.fields: `applies`)
    at its default (or its `inapplicable` value: no optimizer in eval): --filter-by-single-graph compiles fullgraph where dynamo compiles, and
    eager in the same sweep runs as it is."""
    values = experiment.to_dict()
    reset = {spec.name: spec.inapplicable_value for spec in fields_of(EXPERIMENT)
             if spec.applies is not None and values[spec.name] != spec.inapplicable_value
             and not spec.applies(values)}
    return dataclasses.replace(experiment, **reset) if reset else experiment


def expand_configurations(
    request: MatrixRequest, host: HostCapabilities, environ: Optional[Mapping[str, str]] = None,
) -> tuple[list[PlannedConfiguration], list[DroppedCombination]]:
    """Every combination of the requested dimensions, split into valid and dropped.

    Each valid one has its stack picked here, once; `environ` (the parent's environment by
    default) is where debug stacks read their options.
    """
    environ = os.environ if environ is None else environ
    dimensions = {
        spec.name: tuple(request.dimensions.get(spec.name) or unset_dimension(spec, host))
        for spec in fields_of(EXPERIMENT) if spec.dimension
    }
    named = [name for name in dimensions if request.dimensions.get(name)]
    valid, dropped = [], []
    for values in itertools.product(*dimensions.values()):
        given = dict(zip(dimensions, values))
        try:
            experiment = ExperimentConfig(**given, **request.values)
        except FieldError as error:
            raise MatrixError(str(error)) from None
        experiment = where_it_applies(experiment)
        if experiment.xla_flags and experiment.xla is None and experiment.torch_xla2 is None:
            # XLA flags mean nothing to a stack without XLA: run it once, without flags.
            continue
        stack = backends.stack_for(experiment)
        if stack is None:
            reason = backends.no_stack_reason(experiment)
        else:
            experiment = stack.planned(experiment, environ)
            reason = stack.mode_reason(experiment) or stack.invalid_reason(experiment, host)
        if reason:
            detour = sum(given[name] != dimensions[name][0]
                         for name in dimensions if name not in named)
            dropped.append(DroppedCombination(
                experiment, reason, tuple((name, given[name]) for name in named), detour=detour))
        else:
            valid.append(PlannedConfiguration(experiment, stack.label(experiment)))
    # A combination is refused (the user asked for it) when no valid configuration holds the
    # values the user named; the others only come from expanding the unset dimensions.
    met = {tuple((name, getattr(each.experiment, name)) for name in named) for each in valid}
    dropped = [dataclasses.replace(each, refused=each.asked not in met) for each in dropped]
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
    for accelerator in request.dimensions.get("accelerator") or ():
        if accelerator not in ACCELERATORS:
            raise MatrixError(
                f"--accelerator {accelerator!r} is unknown; expected one of {', '.join(ACCELERATORS)}"
            )
    selected = select_models(suite, request.filters, request.excludes,
                             request.filter_tiers, request.exclude_tiers)
    partition = set(partition_models(suite, request.total_partitions, request.partition_id))
    names = [name for name in selected if name in partition]
    configurations, dropped = expand_configurations(request, host, environ)
    plan = Plan(dropped=dropped, model_names=names, configuration_count=len(configurations))
    if not configurations:
        for each in dropped:
            log.debug("left out %s: %s", each.experiment.describe(), each.reason)
        found = plan.refusals()
        shown = (found[0].reason if len(found) == 1
                 else "; ".join(refusal.describe() for refusal in found))
        more = (f" (--log-level=debug lists the {len(dropped)} combinations left out)"
                if len(dropped) > len(found) else "")
        raise MatrixError(f"no requested combination can run here: "
                          f"{shown or 'the matrix is empty'}{more}")
    mine = [
        PlannedExperiment(
            ModelConfig(suite.name, name, reduced=request.reduced,
                        torchbench_dir=request.torchbench_dir),
            configuration.experiment, configuration.label)
        for name in names
        for configuration in configurations
    ]
    plan.requested = mine
    for planned in mine:
        if planned.fingerprint in recorded:
            plan.already_recorded.append(planned)
        else:
            plan.experiments.append(planned)
    return plan



def eager_baseline(planned: PlannedExperiment) -> Optional[PlannedExperiment]:
    """The eager experiment `planned` is compared against: the same model and configuration
    on the eager stack, planned as a sweep would plan it (a compiler's own switches at their
    defaults); None when no eager stack runs it."""
    experiment = where_it_applies(dataclasses.replace(
        planned.experiment, xla=None, dynamo=None, torch_xla2=None, xla_flags=None,
        stack_options=(), stack=None))
    stack = backends.stack_for(experiment)
    if stack is None:
        return None
    experiment = stack.planned(experiment, {})
    return PlannedExperiment(planned.model, experiment, stack.label(experiment))


#: Keys of PyTorch/XLA's --experiment-config that have no field here, and what they may hold.
PEER_ONLY_EXPERIMENT_KEYS = {"keep_model_data_on_cuda": False}
#: Keys a line's `experiment` holds besides the configuration (ignored when given back).
LINE_ONLY_EXPERIMENT_KEYS = ("accelerator_model", "requested_batch_size", "stack")
#: Keys a line's `model` holds besides the configuration (a location: the runner's own).
LINE_ONLY_MODEL_KEYS = ("torchbench_dir",)


def config_json(planned: PlannedExperiment) -> tuple[str, str]:
    """(--model-config, --experiment-config) JSON that plans exactly `planned` again.

    The experiment's keys are PyTorch/XLA's (accelerator, xla, xla_flags, dynamo,
    torch_xla2, test, keep_model_data_on_cuda, enable_functionalization), then every other
    identity field with its value (core.fields), so the JSON says what it runs whatever
    the defaults of the version reading it."""
    model = {name: value for name, value in planned.model.identity().items()}
    experiment = planned.experiment
    config: dict[str, Any] = {
        "accelerator": experiment.accelerator, "xla": experiment.xla,
        "xla_flags": experiment.xla_flags, "dynamo": experiment.dynamo,
        "torch_xla2": experiment.torch_xla2, "test": experiment.test,
        "keep_model_data_on_cuda": False,
        "enable_functionalization": experiment.enable_functionalization,
    }
    for name, value in experiment.identity().items():
        config.setdefault(name, value)
    return json.dumps(model), json.dumps(config)


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = strict_json.loads(text)
    except json.JSONDecodeError as error:
        raise MatrixError(f"{flag} is not valid JSON: {error}") from None
    except ValueError as error:
        raise MatrixError(f"{flag}: {error}") from None
    except RecursionError:
        raise MatrixError(f"{flag} is nested too deeply") from None
    if not isinstance(value, dict):
        raise MatrixError(f"{flag} must be a JSON object, not {type(value).__name__}")
    return value


def experiment_from_json(text: str, base: Optional[Mapping[str, Any]] = None) -> ExperimentConfig:
    """The ExperimentConfig of an --experiment-config (ours, or PyTorch/XLA's); fields it
    does not name take their value from `base` (the command line's), else their default."""
    data = experiment_identity_dict(_json_object(text, "--experiment-config"))
    for key, allowed in PEER_ONLY_EXPERIMENT_KEYS.items():
        if key in data and data[key] != allowed:
            raise MatrixError(
                f"--experiment-config: {key}={json.dumps(data[key])} cannot apply here: keeping "
                "the model and data on CUDA for PyTorch/XLA needs XLA:CUDA, which torch_xla "
                "removed after 2.8; run CUDA experiments with --torch-xla2 or --dynamo")
    missing = [key for key in ("accelerator", "test") if key not in data]
    if missing:
        raise MatrixError(f"--experiment-config needs {' and '.join(missing)}")
    for key in ("xla", "dynamo", "torch_xla2"):
        data.setdefault(key, None)  # an unnamed stack dimension is None, as on the CLI
    try:
        values = parse_config(EXPERIMENT, data, "--experiment-config",
                              ignored=(*PEER_ONLY_EXPERIMENT_KEYS, *LINE_ONLY_EXPERIMENT_KEYS))
        return ExperimentConfig(**{**dict(base or {}), **values})
    except FieldError as error:
        raise MatrixError(str(error)) from None


def single_plan(suite: Suite, model_text: str, experiment_text: str, request: MatrixRequest,
                host: HostCapabilities, environ: Optional[Mapping[str, str]] = None) -> Plan:
    """A plan of exactly the experiment that --model-config and --experiment-config name
    (no filter, partition or resume applies); MatrixError when it cannot run here."""
    environ = os.environ if environ is None else environ
    model_data = _json_object(model_text, "--model-config")
    name = model_data.get("model_name")
    if "model_name" in model_data and not isinstance(name, str):
        raise MatrixError(f"--model-config: model_name must be a string, not "
                          f"{shown_value(json.dumps(name))}")
    if not isinstance(name, str) or not name:
        raise MatrixError("--model-config needs a model_name")
    try:
        model_values = parse_config(MODEL, {"suite_name": suite.name, **model_data},
                                    "--model-config", ignored=LINE_ONLY_MODEL_KEYS)
    except FieldError as error:
        raise MatrixError(str(error)) from None
    suite_name = model_values["suite_name"]
    if suite_name != suite.name:
        raise MatrixError(f"--model-config names suite {suite_name!r}, but --suite-name is "
                          f"{suite.name!r}")
    if name not in suite.model_names():
        raise MatrixError(f"--model-config: model {name!r} is not in suite {suite.name!r}; its "
                          f"models are: {', '.join(suite.model_names())}")
    experiment = where_it_applies(experiment_from_json(experiment_text, request.values))
    if experiment.accelerator not in ACCELERATORS:
        raise MatrixError(f"--experiment-config: accelerator {experiment.accelerator!r} is "
                          f"unknown; expected one of {', '.join(ACCELERATORS)}")
    stack = backends.stack_for(experiment)
    if stack is None:
        raise MatrixError(f"--experiment-config: {backends.no_stack_reason(experiment)}")
    experiment = stack.planned(experiment, environ)
    reason = stack.mode_reason(experiment) or stack.invalid_reason(experiment, host)
    if reason:
        raise MatrixError(f"--experiment-config cannot run here: {reason}")
    model = ModelConfig(suite.name, name, reduced=model_values.get("reduced", request.reduced),
                        torchbench_dir=request.torchbench_dir)
    planned = PlannedExperiment(model, experiment, stack.label(experiment))
    return Plan(experiments=[planned], model_names=[name], configuration_count=1,
                requested=[planned])
