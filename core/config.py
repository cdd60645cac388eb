"""Configuration dataclasses shared by the parent and the child.

`ModelConfig` and `ExperimentConfig` identify an experiment. Their fingerprint is the
digest of their canonical JSON (sorted keys), identical in every process and every run.
Fields at their default value are left out of the canonical form, so adding a switch keeps
the fingerprints of existing lines; fields that only locate or label something (the stack's
name, derived from xla/dynamo/torch_xla2, and the TorchBench folder) are never in it.
`RunSettings` says how an experiment is measured; of it only the seed changes what is
measured (the weights and the inputs), so the fingerprint takes the seed too, as a `seed`
key of the canonical form present only when the seed is not `DEFAULT_SEED` (lines of the
default seed keep their fingerprints). Lines record the seed as their top-level `seed`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

ACCELERATORS = ("cpu", "cuda", "tpu")
XLA_MODES = (None, "PJRT")
TORCH_XLA2_MODES = (None, "torch_export", "extract_jax")
TESTS = ("eval", "train")
PRECISIONS = ("fp32", "bf16", "fp16", "amp")
#: PyTorch/XLA's runner's spellings: default (one bf16 pass), high (TF32 / bf16x3), highest (fp32).
MATMUL_PRECISIONS = ("default", "high", "highest")
DEFAULT_MATMUL_PRECISION = "high"
#: torch.set_float32_matmul_precision's name for each (older lines may hold "medium").
TORCH_MATMUL_PRECISIONS = {"default": "medium", "medium": "medium", "high": "high",
                           "highest": "highest"}
DEFAULT_DYNAMO = (None, "inductor", "openxla")
#: Inductor's modes as the compiler dashboard tracks them, plus max-autotune.
INDUCTOR_MODES = ("default", "cudagraphs", "dynamic", "max-autotune")
DEFAULT_MODE = "default"
DEFAULT_SEED = 1234
#: Seeds torch accepts, less room for the per-iteration offsets of --randomize-input.
SEED_RANGE = (-(2**63), 2**63 - 1)


def none_if_none_string(value: Optional[str]) -> Optional[str]:
    """Map the command-line spelling 'None' (any case) to Python's None."""
    if value is None or value.strip().lower() in ("none", ""):
        return None
    return value


def _fields_from(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _identity(instance: Any, excluded: frozenset[str]) -> dict[str, Any]:
    """The fields of `instance` that identify it: not excluded, not at their default."""
    identity = {}
    for spec in dataclasses.fields(instance):
        if spec.name in excluded:
            continue
        value = getattr(instance, spec.name)
        default = spec.default if spec.default is not dataclasses.MISSING else (
            spec.default_factory() if spec.default_factory is not dataclasses.MISSING
            else dataclasses.MISSING)
        if value != default:
            identity[spec.name] = list(value) if isinstance(value, tuple) else value
    return identity


@dataclass(frozen=True)
class ModelConfig:
    """Which model of which suite, with the suite's options."""

    suite_name: str
    model_name: str
    #: Reduced ("small") model configurations, for tests and CI (models/reduced.py).
    reduced: bool = False
    #: Where the TorchBench checkout is (torchbench suite only); a location, not identity.
    torchbench_dir: Optional[str] = None

    NOT_IDENTITY = frozenset({"torchbench_dir"})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ModelConfig":
        return cls(**_fields_from(cls, data))

    def identity(self) -> dict[str, Any]:
        return _identity(self, self.NOT_IDENTITY)


@dataclass(frozen=True)
class ExperimentConfig:
    """One point of the matrix: the stack and what is measured on it."""

    accelerator: str
    xla: Optional[str]
    dynamo: Optional[str]
    torch_xla2: Optional[str]
    test: str
    xla_flags: Optional[str] = None
    precision: str = "fp32"
    batch_size: Optional[int] = None
    matmul_precision: str = DEFAULT_MATMUL_PRECISION
    #: Full fp32 in PyTorch's matmuls and convolutions, whatever matmul_precision says.
    disable_tf32: bool = False
    #: fp16/bf16 reductions in SDPA's math path (PyTorch's harness turns them on; the CLI
    #: does too, --disable-fp16-bf16-reduction-math-sdp turns them off).
    fp16_bf16_reduction_math_sdp: bool = False
    #: The compiler mode (INDUCTOR_MODES) for stacks that have modes; None elsewhere.
    mode: Optional[str] = None
    enable_functionalization: bool = False
    optimizer: Optional[str] = None
    amp_dtype: Optional[str] = None
    #: torch.compile(fullgraph=True): a graph break fails the experiment
    #: (--filter-by-single-graph; set only where dynamo compiles).
    fullgraph: bool = False
    #: Options of the stack that change its results, as sorted (name, value) pairs.
    stack_options: tuple[tuple[str, str], ...] = ()
    #: The registry name of the stack that runs it (backends/stacks), set at planning.
    stack: Optional[str] = None

    NOT_IDENTITY = frozenset({"stack"})

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["stack_options"] = dict(self.stack_options)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExperimentConfig":
        values = _fields_from(cls, data)
        options = values.get("stack_options") or {}
        if isinstance(options, Mapping):
            values["stack_options"] = tuple(sorted((str(k), str(v)) for k, v in options.items()))
        else:
            values["stack_options"] = tuple(tuple(pair) for pair in options)
        return cls(**values)

    def identity(self) -> dict[str, Any]:
        identity = _identity(self, self.NOT_IDENTITY)
        if "stack_options" in identity:
            identity["stack_options"] = dict(self.stack_options)
        return identity

    def torch_matmul_precision(self) -> str:
        """What torch.set_float32_matmul_precision gets: 'highest' under disable_tf32."""
        if self.disable_tf32:
            return "highest"
        return TORCH_MATMUL_PRECISIONS.get(self.matmul_precision, self.matmul_precision)

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
        return text


@dataclass(frozen=True)
class RunSettings:
    """How each experiment is run and measured (not part of its identity)."""

    repeat: int = 10
    iterations_per_run: int = 1
    warmup: int = 3
    randomize_input: bool = False
    seed: int = DEFAULT_SEED
    verify: bool = False
    verify_only: bool = False
    verify_iterations: int = 1
    #: Threads of the child's torch; None: one per core of the child's CPU set.
    threads: Optional[int] = None
    #: Eager and the stack timed interleaved in one child, where the stack allows it.
    paired: bool = True
    #: Time each iteration between CUDA events instead of the host clock (--pure-wall-time;
    #: stacks whose work runs on CUDA streams only).
    pure_wall_time: bool = False
    #: Observability options by flag name (runner/observers declares the flags).
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
        values = _fields_from(cls, data)
        values["observe"] = dict(values.get("observe") or {})
        return cls(**values)


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def fingerprint(model: ModelConfig, experiment: ExperimentConfig, seed: int = DEFAULT_SEED) -> str:
    """Stable digest of what identifies model + experiment (+ a seed other than the
    default), the key used to resume."""
    identity: dict[str, Any] = {"model": model.identity(), "experiment": experiment.identity()}
    if seed != DEFAULT_SEED:
        identity["seed"] = seed
    payload = canonical_json(identity)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


#: Key of a line's `experiment` holding the batch size asked for (None: the suite's default).
#: Lines write the batch size used as `experiment.batch_size`, as PyTorch/XLA's runner does;
#: the identity (and so the fingerprint) keeps the requested one.
REQUESTED_BATCH_SIZE = "requested_batch_size"


def experiment_identity_dict(experiment: Mapping[str, Any]) -> dict[str, Any]:
    """A line's `experiment` as ExperimentConfig reads it: `batch_size` is the requested one.

    Lines with `requested_batch_size` hold the used batch size in `batch_size`; older lines
    (without that key) held the requested one there."""
    data = dict(experiment)
    if REQUESTED_BATCH_SIZE in data:
        data["batch_size"] = data.pop(REQUESTED_BATCH_SIZE)
    return data


def seed_of_line(line: Mapping[str, Any]) -> Optional[int]:
    """The seed a line was measured with (lines without one: the default); None when the
    recorded value is not an integer."""
    seed = line.get("seed", DEFAULT_SEED)
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def fingerprint_of_line(line: Mapping[str, Any]) -> Optional[str]:
    """Fingerprint of a results line, recomputed from its model, experiment and seed."""
    seed = seed_of_line(line)
    try:
        model = ModelConfig.from_dict(line["model"])
        experiment = ExperimentConfig.from_dict(experiment_identity_dict(line["experiment"]))
        return fingerprint(model, experiment, seed) if seed is not None else None
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return None


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def safe_component(text: str) -> str:
    """A path-safe rendering of one piece of an experiment id (never '.' or '..')."""
    cleaned = _UNSAFE.sub("_", text).strip("._") or "_"
    return cleaned[:60]


def experiment_id(model: ModelConfig, experiment: ExperimentConfig, stack_label: str,
                  seed: int = DEFAULT_SEED) -> str:
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
    if seed != DEFAULT_SEED:
        parts.append(f"seed{seed}")
    readable = "-".join(safe_component(str(p)) for p in parts)
    return f"{readable}-{fingerprint(model, experiment, seed)[:10]}"
