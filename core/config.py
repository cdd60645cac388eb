"""Configuration dataclasses shared by the parent and the child.

`ModelConfig` and `ExperimentConfig` identify an experiment; their fields are those of the
field table (`core.fields.FIELDS`), checked when a config is made. Their fingerprint is the
digest of the canonical JSON (sorted keys) of every identity field with its resolved value,
identical in every process and every run, and different whenever what is measured differs,
also when a default changes. Fields that only locate or label something (the stack's name,
derived from xla/dynamo/torch_xla2, and the TorchBench folder) are never in it.
`RunSettings` says how an experiment is measured; none of it changes what is measured (the
seed, which makes the weights and the inputs, is the experiment's `seed`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from core.fields import (
    DEFAULT_SEED,
    EXPERIMENT,
    MODEL,
    REQUIRED,
    SCHEMA_VERSION,
    fields_of,
    identity_fields,
    line_values,
    optimizer_runs,
    resolved_identity,
)

#: torch.set_float32_matmul_precision's name for each (older lines may hold "medium").
TORCH_MATMUL_PRECISIONS = {"default": "medium", "medium": "medium", "high": "high",
                           "highest": "highest"}
#: The dynamo dimension's values when --dynamo is not given.
DEFAULT_DYNAMO = (None, "inductor", "openxla")
DEFAULT_MODE = "default"


def _table_fields(scope: str):
    """Class decorator: the scope's fields of the table become the class's dataclass fields
    (frozen), each value checked when an instance is made."""

    def decorate(cls: type) -> type:
        specs = fields_of(scope)
        cls.__annotations__ = {spec.name: "Any" for spec in specs}
        for spec in specs:
            if spec.default is not REQUIRED:
                setattr(cls, spec.name, spec.default)
        cls.FIELDS = specs

        def __post_init__(self) -> None:
            for spec in specs:
                object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))

        cls.__post_init__ = __post_init__
        return dataclass(frozen=True)(cls)

    return decorate


def _known_values(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {spec.name for spec in cls.FIELDS}
    return {key: value for key, value in data.items() if key in names}


def _as_json(instance: Any) -> dict[str, Any]:
    return {spec.name: spec.to_json(getattr(instance, spec.name)) for spec in instance.FIELDS}


@_table_fields(MODEL)
class ModelConfig:
    """Which model of which suite, with the suite's options (fields: core.fields)."""

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        return cls(**_known_values(cls, data))

    def identity(self) -> dict[str, Any]:
        """Every identity field with its value, as the fingerprint takes them."""
        return resolved_identity(MODEL, _as_json(self))


@_table_fields(EXPERIMENT)
class ExperimentConfig:
    """One point of the matrix: the stack and what is measured on it (fields: core.fields)."""

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExperimentConfig":
        return cls(**_known_values(cls, data))

    def identity(self) -> dict[str, Any]:
        """Every identity field with its value, as the fingerprint takes them."""
        return resolved_identity(EXPERIMENT, _as_json(self))

    def torch_matmul_precision(self) -> str:
        """What torch.set_float32_matmul_precision gets: 'highest' under disable_tf32."""
        if self.disable_tf32:
            return "highest"
        return TORCH_MATMUL_PRECISIONS.get(self.matmul_precision, self.matmul_precision)

    def optimizer_in_effect(self) -> Optional[str]:
        """The optimizer a training step runs: None in eval, and for `harness` off CUDA
        (PyTorch's harness trains without one there)."""
        values = {"test": self.test, "optimizer": self.optimizer, "accelerator": self.accelerator}
        return self.optimizer if optimizer_runs(values) else None

    def option(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The value of one stack option, or `default`."""
        return dict(self.stack_options).get(name, default)

    def describe(self) -> str:
        text = (
            f"{self.accelerator} xla={self.xla} dynamo={self.dynamo} "
            f"torch_xla2={self.torch_xla2} test={self.test} precision={self.precision}"
        )
        if self.batch_size is not None:
            text += f" batch_size={self.batch_size}"
        if self.mode is not None:
            text += f" mode={self.mode}"
        if self.xla_flags:
            text += f" xla_flags={self.xla_flags!r}"
        if self.fullgraph:
            text += " fullgraph"
        if self.seed != DEFAULT_SEED:
            text += f" seed={self.seed}"
        return text


#: --timing-core's values (RunSettings.timing_core).
TIMING_CORES = ("fastest", "any")


@dataclass(frozen=True)
class Knob:
    """The flag of one how-to-measure setting (a field of `RunSettings`): the parser
    (runner/plan/parser.py) builds the flag from it, with the field's type and default.

    `negated`: the flag is a switch that turns the setting off (--no-paired-timing);
    `minimum`: the least value of a number; `implied_by`: a switch that sets it too;
    `folder`: the value is a folder (made absolute when parsed), by default the one
    `environment` (a variable) names."""

    flag: str
    help: str
    minimum: Optional[int] = None
    choices: Optional[tuple] = None
    negated: bool = False
    metavar: Optional[str] = None
    implied_by: Optional[str] = None
    folder: bool = False
    environment: Optional[str] = None

    @property
    def dest(self) -> str:
        """The flag's name in the parsed flags."""
        return self.flag.lstrip("-").replace("-", "_")


def _knob(default: Any, flag: str, help: str, **spec: Any) -> Any:
    return field(default=default, metadata={"knob": Knob(flag, help, **spec)})


@dataclass(frozen=True)
class RunSettings:
    """How each experiment is run and measured (not part of its identity): each setting
    once, with its type, default and flag (`knobs()`)."""

    repeat: int = _knob(10, "--repeat", "timed runs per experiment", minimum=1)
    iterations_per_run: int = _knob(1, "--iterations-per-run", "iterations in each timed run",
                                    minimum=1)
    warmup: int = _knob(3, "--warmup", "warm-up iterations before timing; the first is the cold "
                                       "start", minimum=0)
    randomize_input: bool = _knob(False, "--randomize-input",
                                  "a different seeded input for each iteration of a run")
    verify: bool = _knob(False, "--verify",
                         "check each experiment's result against eager (and fp64) and record a "
                         "verification code", implied_by="verify_only")
    verify_only: bool = _knob(False, "--verify-only", "verify without timing")
    verify_iterations: int = _knob(1, "--verify-iterations",
                                   "iterations run before the results are compared", minimum=1)
    #: Threads of the child's torch; None: one per core of the child's CPU set.
    threads: Optional[int] = _knob(None, "--threads", "threads of the child's torch (default: "
                                   "one per core the child is pinned to)", minimum=1)
    #: Eager and the stack timed interleaved in one child, where the stack allows it.
    paired: bool = _knob(True, "--no-paired-timing",
                         "time compiled stacks in a child of their own instead of interleaved "
                         "with eager in the same child (docs/timing.md)", negated=True)
    #: Time each iteration between CUDA events instead of the host clock (--pure-wall-time;
    #: stacks whose work runs on CUDA streams only).
    pure_wall_time: bool = _knob(
        False, "--pure-wall-time",
        "time each iteration of the timed runs between CUDA events, not by the host clock "
        "(stacks whose work runs on CUDA streams: eager and dynamo on cuda; elsewhere a note "
        "says the host clock timed it)")
    #: Time the reference workload before and after each timing process (slow periods:
    #: child/reference.py, runner/run/record/slow_periods.py).
    reference_workload: bool = _knob(
        True, "--no-reference-workload",
        "do not time the short reference workload before and after each timing process (it "
        "detects slow periods of the machine: docs/timing.md)", negated=True)
    #: On CUDA, profile a few iterations after the timed runs for the device's busy time
    #: per iteration (child/device_busy.py).
    device_busy: bool = _knob(
        True, "--no-device-busy",
        "on CUDA, do not profile three more iterations after the timed runs to record the "
        "device's busy time per iteration (its kernels' time, summed: docs/timing.md)",
        negated=True)
    #: Re-measure an experiment flagged as measured in a slow period, at the end of the
    #: sweep, up to this many times (--remeasure-slow).
    remeasure_slow: int = _knob(
        0, "--remeasure-slow",
        "re-measure an experiment whose line is flagged as measured in a slow period, later in "
        "the sweep, up to N times; the line kept is the first not flagged, else the least slow "
        "(default 0: never)", minimum=0, metavar="N")
    #: Before measuring a slow line again, wait up to this many seconds for the host pulse to
    #: read fast (runner/run/fast_state.py) (--slow-wait).
    slow_wait: int = _knob(
        120, "--slow-wait",
        "with --remeasure-slow, wait up to this many seconds for the host to read fast (its "
        "pulse within the line's fast bound, 3 reads in a row a second apart) before measuring "
        "a slow line again; 0: measure it again at once (default 120)", minimum=0,
        metavar="SECONDS")
    #: On CUDA, the timing thread's core for the timed runs: "any" (wherever the scheduler
    #: puts it, as PyTorch's harness runs) or "fastest" (the core of the child's set where
    #: the host pulse ran fastest: child/reference.py) (--timing-core).
    timing_core: str = _knob(
        "any", "--timing-core",
        "on CUDA, where the thread that times the runs (and launches their work) runs: 'any' "
        "(the default) leaves it to the scheduler, as PyTorch's harness does; 'fastest' pins "
        "it, just before the timed runs, to the core of the child's set where a short Python "
        "loop ran fastest, and moves it when that core slows down: steadier figures for "
        "launch-bound models on hosts whose cores change speed (docs/timing.md)",
        choices=TIMING_CORES)
    #: A folder the children keep their compile caches in across experiments and runs
    #: (None: fresh caches per experiment) (--compile-cache).
    compile_cache: Optional[str] = _knob(
        None, "--compile-cache",
        "keep the children's compile caches (inductor's, Triton's) in this folder, across "
        "experiments and runs: what was compiled once then compiles from the cache, and the "
        "line's compile time is a warm one; None: fresh caches for each experiment, so that the "
        "compile time is a cold start's (default: $EXPERIMENT_RUNNER_COMPILE_CACHE, else None; "
        "docs/timing.md)", folder=True, environment="EXPERIMENT_RUNNER_COMPILE_CACHE",
        metavar="DIR")
    #: Observability options by flag name (observers declares the flags).
    observe: Mapping[str, Any] = field(default_factory=dict)

    def observing(self, name: str) -> Any:
        """The value of one observability option (None when not given)."""
        return self.observe.get(name)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["observe"] = dict(self.observe)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSettings":
        names = {spec.name for spec in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in names}
        values["observe"] = dict(values.get("observe") or {})
        return cls(**values)


def knobs() -> tuple[tuple[dataclasses.Field, Knob], ...]:
    """Each how-to-measure setting with a flag: its field of `RunSettings` and its `Knob`."""
    return tuple((spec, spec.metadata["knob"]) for spec in dataclasses.fields(RunSettings)
                 if "knob" in spec.metadata)


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _digest(identity: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(identity).encode("utf-8")).hexdigest()


def fingerprint(model: ModelConfig, experiment: ExperimentConfig) -> str:
    """Stable digest of every identity field of model + experiment: the key of resume,
    claims and the reports."""
    return _digest({"model": model.identity(), "experiment": experiment.identity()})


#: Key of a line's `experiment` holding the batch size asked for (None: the suite's default).
#: Lines write the batch size used as `experiment.batch_size`, as PyTorch/XLA's runner does;
#: the identity (and so the fingerprint) keeps the requested one.
REQUESTED_BATCH_SIZE = "requested_batch_size"


def experiment_identity_dict(experiment: Mapping[str, Any]) -> dict[str, Any]:
    """A line's `experiment` as field values: `batch_size` is the requested one.

    Lines with `requested_batch_size` hold the used batch size in `batch_size`; older lines
    (without that key) held the requested one there."""
    data = dict(experiment)
    data.update(line_values(EXPERIMENT, experiment))
    data.pop(REQUESTED_BATCH_SIZE, None)
    return data


def line_identity(line: Mapping[str, Any]) -> dict[str, Any]:
    """The identity a results line records, every field resolved: the line's value, else
    the value lines that lack the field imply (core.fields: `implied`, never today's
    default). Lines of version 1 kept the seed at the top level. KeyError or TypeError when
    the line has no model or experiment object."""
    model, experiment = line["model"], line["experiment"]
    if not isinstance(model, Mapping) or not isinstance(experiment, Mapping):
        raise TypeError("the line's model and experiment must be objects")
    model_values = line_values(MODEL, model)
    experiment_values = line_values(EXPERIMENT, experiment)
    if "seed" not in experiment_values and "seed" in line:
        experiment_values["seed"] = line["seed"]
    for values, scope in ((model_values, MODEL), (experiment_values, EXPERIMENT)):
        for spec in identity_fields(scope):
            if spec.name not in values and spec.required:
                raise KeyError(f"the line's {scope} has no {spec.name}")
            if spec.name in values and not spec.has_kind(values[spec.name]):
                raise TypeError(f"the line's {scope}.{spec.name} is not a {spec.kind.__name__}")
    return {"model": resolved_identity(MODEL, model_values),
            "experiment": resolved_identity(EXPERIMENT, experiment_values)}


#: Keys a line's model and experiment hold besides their fields: what the line records
#: about the run (the device's name, the batch size asked for, the stack's registry name).
LINE_ONLY_KEYS = {MODEL: frozenset({"torchbench_dir"}),
                  EXPERIMENT: frozenset({"accelerator_model", REQUESTED_BATCH_SIZE, "stack"})}


def unreadable_identity(line: Mapping[str, Any]) -> list[str]:
    """The keys of a line of a newer schema than this version's whose model or experiment
    holds fields this version does not know (`model.x`, `experiment.y`); [] for any other
    line. Such a line is not this version's experiment, whatever its other fields say: a
    newer runner's field at a value other than its default measures something else."""
    version = line.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version <= SCHEMA_VERSION:
        return []
    unknown = []
    for scope in (MODEL, EXPERIMENT):
        part = line.get(scope)
        if not isinstance(part, Mapping):
            continue
        known = {key for spec in fields_of(scope) for key in (spec.name, spec.key)}
        unknown += [f"{scope}.{key}" for key in part
                    if key not in known and key not in LINE_ONLY_KEYS[scope]]
    return sorted(unknown)


def fingerprint_of_line(line: Mapping[str, Any]) -> Optional[str]:
    """Fingerprint of a results line of any version, recomputed from the identity it
    records (`line_identity`); None for a line that names no model or experiment."""
    try:
        return _digest(line_identity(line))
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def safe_component(text: str) -> str:
    """A path-safe rendering of one piece of an experiment id (never '.' or '..')."""
    cleaned = _UNSAFE.sub("_", text).strip("._") or "_"
    return cleaned[:60]


def experiment_id(model: ModelConfig, experiment: ExperimentConfig, stack_label: str) -> str:
    """Readable, path-safe, unique id: model and configuration, then a digest prefix."""
    parts = [
        model.suite_name,
        model.model_name,
        experiment.accelerator,
        stack_label.replace(":", "-"),
        experiment.test,
        experiment.precision,
    ]
    if experiment.batch_size is not None:
        parts.append(f"bs{experiment.batch_size}")
    if model.reduced:
        parts.append("reduced")
    if experiment.seed != DEFAULT_SEED:
        parts.append(f"seed{experiment.seed}")
    readable = "-".join(safe_component(str(p)) for p in parts)
    return f"{readable}-{fingerprint(model, experiment)[:10]}"
