"""The experiment's fields, declared once.

Every field of a model or an experiment is one `Field` of `FIELDS`: its type, allowed values
or range, default, flag and help, whether it is identity, how it shows in reports, and the
schema version it came in with the value that older lines imply. From this table come:

- the typed configs (`core.config.ModelConfig`, `core.config.ExperimentConfig`: their
  dataclass fields) and their validation (`Field.check`);
- the command line's arguments (`runner/plan/parser.py`: `add_field_flags`, `value_parser`);
- the parsing of `--model-config` and `--experiment-config` (`parse_config`);
- the fingerprint (every identity field with its resolved value: `resolved_identity`);
- the reports' experiment identity (`reports/read/engine.py` builds its SQL from the identity
  fields) and their configuration columns, grouping, labels and baselines
  (`core.columns.config_columns`, from `report` and `baseline_shares`);
- the key of the cached workload signature (`changes_work`: `core.columns.work_fields`).

Adding an identity switch is one entry here (its `since` the current `SCHEMA_VERSION`, its
`implied` value what lines written before it measured), plus the code that uses it.

Lines say what they are: every line carries `schema_version` and every identity field with
its value. Lines written before `schema_version` existed are version 1; a field a line lacks
reads as the field's `implied` value (what was measured before the field existed), never as
today's default, so a changed default never makes two experiments one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

#: The results line's version: 1 for lines without `schema_version` (every line written
#: before it existed), 2 since every line carries every identity field and its version.
SCHEMA_VERSION = 2
#: The version of lines that carry no `schema_version`.
UNVERSIONED = 1

ACCELERATORS = ("cpu", "cuda", "tpu")
XLA_MODES = (None, "PJRT")
TORCH_XLA2_MODES = (None, "torch_export", "extract_jax")
TESTS = ("eval", "train")
PRECISIONS = ("fp32", "bf16", "fp16", "amp")
#: PyTorch/XLA's runner's spellings: default (one bf16 pass), high (TF32 / bf16x3), highest (fp32).
MATMUL_PRECISIONS = ("default", "high", "highest")
#: Inductor's modes as the compiler dashboard tracks them, plus max-autotune.
INDUCTOR_MODES = ("default", "cudagraphs", "dynamic", "max-autotune")
#: harness: what PyTorch's harness trains with (Adam, capturable and foreach, or SGD for the
#: models it names; no optimizer off CUDA).
OPTIMIZERS = (None, "sgd", "adam", "harness")
HARNESS_OPTIMIZER = "harness"
AMP_DTYPES = (None, "bf16", "fp16")
DEFAULT_SEED = 1234
#: Timing processes per experiment when --processes is not given, by accelerator (measured:
#: docs/timing.md, "Several processes").
DEFAULT_PROCESSES = {"cpu": 1, "cuda": 3, "tpu": 1}
MAX_PROCESSES = 100
#: The largest batch size taken: a tensor dimension of that size already holds more
#: elements than any device's memory (2**63 passed, then failed in the child).
MAX_BATCH_SIZE = 2**31 - 1
#: How an experiment's timing processes compile: sharing the first one's compile caches, or
#: each with fresh ones (so that the processes sample the compiler's own variation too).
PROCESS_CACHES = ("shared", "fresh")
#: Seeds torch accepts, less room for the per-iteration offsets of --randomize-input.
SEED_RANGE = (-(2**63), 2**63 - 1)
#: A bisection point's label: a commit's short hash or a package's `name==version`.
POINT_LABEL = re.compile(r"[A-Za-z0-9_.+=!~-]+")
#: A dynamo backend's name (inductor, openxla, aot_eager, a registered custom one).
BACKEND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")

#: Field.scope values.
MODEL, EXPERIMENT = "model", "experiment"
#: Field.report values: a column of the configuration (accelerator, test, ...), a part of the
#: stack the configuration runs on (its `stack` column, the stack's label), a
#: `name=value` part of the configuration's label when not at its default, a figure of
#: each experiment (not grouping: the batch size), or nothing (locations, the stack's name).
#: core.columns reads them.
COLUMN, STACK, LABEL, PER_EXPERIMENT, NOT_SHOWN = "column", "stack", "label", "per-experiment", "not-shown"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a field that has none: it must be given.
REQUIRED: Any = _Required()
#: `Field.implied` when lines lacking the field measured what its default says.
AS_DEFAULT: Any = type("_AsDefault", (), {"__repr__": lambda self: "AS_DEFAULT"})()


class FieldError(ValueError):
    """A value a field does not allow; the message names the field and the value."""


def none_if_none_string(value: Optional[str]) -> Optional[str]:
    """Map the command-line spelling 'None' (any case) to Python's None."""
    if value is None or value.strip().lower() in ("none", ""):
        return None
    return value


def _shown(value: Any) -> str:
    """A value as a message shows it: JSON's spelling for JSON values."""
    import json

    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class Field:
    """One field of a model or an experiment."""

    name: str
    scope: str
    #: str, int, bool or dict (a mapping of strings to strings).
    kind: type
    default: Any = REQUIRED
    help: str = ""
    #: None is allowed (spelled None, null or 'None').
    optional: bool = False
    choices: Optional[tuple] = None
    #: A regular expression a string value must match whole.
    pattern: Optional[re.Pattern] = None
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    #: Part of what is measured: in the fingerprint, and groups lines in reports.
    identity: bool = True
    #: The command-line flag (and its aliases), or None when there is none.
    flags: tuple[str, ...] = ()
    #: The flag may be repeated and each value is a dimension of the matrix.
    dimension: bool = False
    #: A switch flag that sets False (its field's default is True): --disable-...
    negated_switch: bool = False
    #: How the field shows in reports (COLUMN, STACK, LABEL, PER_EXPERIMENT, NOT_SHOWN).
    report: str = LABEL
    #: A COLUMN's name in a configuration's label (`name=value`), where not the field's.
    report_name: Optional[str] = None
    #: A value the reports read as the default and show for it (inductor's mode "default").
    report_default: Optional[str] = None
    #: Whether the field changes the work itself (the model, its inputs, its training step):
    #: it keys the cached workload signature (child/workload.py).
    changes_work: bool = False
    #: The schema version the field came in with.
    since: int = UNVERSIONED
    #: What a line that lacks the field measured (AS_DEFAULT: what `default` says).
    implied: Any = AS_DEFAULT
    #: The key of the line's model/experiment object holding the field, where it differs.
    line_key: Optional[str] = None
    #: Whether the eager baseline a configuration is compared against shares this field's
    #: value (numerics do; a compiler's own switch does not).
    baseline_shares: bool = True
    #: Where the field applies (a predicate of the experiment's values, by name); elsewhere
    #: planning leaves it at its default, so one sweep can ask for a compiler's switch and
    #: still time eager as it is. None: everywhere.
    applies: Optional[Callable[[Mapping[str, Any]], bool]] = None
    #: The value planning gives the field where it does not apply (AS_DEFAULT: the default).
    inapplicable: Any = AS_DEFAULT
    #: The values an unset dimension takes, where it is not "every value valid here"
    #: (decided by the planner) nor just the default.
    sweep_default: Optional[tuple] = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def implied_value(self) -> Any:
        """The value of a line (or a config) that does not name the field."""
        return self.default if self.implied is AS_DEFAULT else self.implied

    @property
    def inapplicable_value(self) -> Any:
        """The value the field takes where it does not apply."""
        return self.default if self.inapplicable is AS_DEFAULT else self.inapplicable

    @property
    def key(self) -> str:
        """The key of the field in a results line."""
        return self.line_key or self.name

    def check(self, value: Any, source: str = "") -> Any:
        """`value` as the field holds it; FieldError naming the field and value otherwise.

        Strings 'None' and '' of an optional string field read as None; a dict field
        becomes sorted (name, value) pairs. `source` prefixes the message (a flag or a
        config's name)."""
        where = f"{source}: " if source else ""
        if self.optional and (value is None or (self.kind is str and isinstance(value, str)
                                                 and none_if_none_string(value) is None)):
            return None
        if value is None:
            raise FieldError(f"{where}{self.name} may not be null")
        if self.kind is bool:
            if not isinstance(value, bool):
                raise FieldError(f"{where}{self.name} must be true or false, not {_shown(value)}")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and not math.isfinite(value):
                    raise FieldError(f"{where}{self.name} must be a finite integer, not {_shown(value)}")
                raise FieldError(f"{where}{self.name} must be an integer, not {_shown(value)}")
            if self.minimum is not None and value < self.minimum:
                raise FieldError(f"{where}{self.name} {value} must be at least {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                raise FieldError(f"{where}{self.name} {value} must be at most {self.maximum}")
        elif self.kind is str:
            if not isinstance(value, str):
                raise FieldError(f"{where}{self.name} must be a string, not {_shown(value)}")
            if self.pattern is not None and not self.pattern.fullmatch(value):
                raise FieldError(f"{where}{self.name} {value!r} is not a valid name")
        elif self.kind is dict:
            pairs = value.items() if isinstance(value, Mapping) else value
            try:
                items = [(name, option) for name, option in pairs]
            except (TypeError, ValueError):
                raise FieldError(f"{where}{self.name} must be an object of strings, "
                                 f"not {_shown(value)}") from None
            if not all(isinstance(name, str) and isinstance(option, str) for name, option in items):
                raise FieldError(f"{where}{self.name} must map strings to strings, not {_shown(value)}")
            return tuple(sorted(items))
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join("None" if choice is None else str(choice) for choice in self.choices)
            raise FieldError(f"{where}{self.name} {_shown(value)} is not one of: {allowed}")
        return value

    def has_kind(self, value: Any) -> bool:
        """Whether `value` is of the field's type (None where optional): what reading a line
        asks, where allowed values may be those of another version."""
        if value is None:
            return self.optional
        if self.kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if self.kind is dict:
            return isinstance(value, (Mapping, tuple, list))
        return isinstance(value, self.kind)

    def to_json(self, value: Any) -> Any:
        """The field's value as a results line (and the fingerprint) writes it: a dict field
        (a mapping or (name, value) pairs) as an object in name order."""
        if self.kind is dict:
            return dict(sorted(dict(value).items()))
        return value


def _f(name: str, scope: str, kind: type, **spec: Any) -> Field:
    return Field(name, scope, kind, **spec)


#: Every field, in the order of the configs' dataclass fields (required ones first).

def optimizer_runs(values: Mapping[str, Any]) -> bool:
    """Whether an experiment's training step runs its optimizer: never in eval, and `harness`
    only on CUDA (PyTorch's harness trains without one elsewhere), so that those experiments
    stay what they were before `harness` became the default."""
    return values["test"] == "train" and (
        values["optimizer"] != HARNESS_OPTIMIZER or values["accelerator"] == "cuda")

FIELDS: tuple[Field, ...] = (
    # The model.
    _f("suite_name", MODEL, str, report=COLUMN, changes_work=True, help="the suite the model is from"),
    _f("model_name", MODEL, str, report=COLUMN, changes_work=True, help="the model's name in its suite"),
    _f("reduced", MODEL, bool, default=False, changes_work=True,
       help="reduced (small) model configurations, for tests and CI "
            "(EXPERIMENT_RUNNER_SMALL_MODELS)"),
    _f("torchbench_dir", MODEL, str, default=None, optional=True, identity=False,
       report=NOT_SHOWN, help="where the TorchBench checkout is (a location, not identity)"),
    # The experiment: the stack.
    _f("accelerator", EXPERIMENT, str, choices=ACCELERATORS, flags=("--accelerator",),
       dimension=True, report=COLUMN, changes_work=True,
       help="device to run on; default: every one present"),
    _f("xla", EXPERIMENT, str, optional=True, choices=XLA_MODES, flags=("--xla",),
       dimension=True, report=STACK,
       help="None or PJRT (PyTorch/XLA); XRT was removed from PyTorch/XLA and is refused "
            "with that reason"),
    _f("dynamo", EXPERIMENT, str, optional=True, pattern=BACKEND_NAME, flags=("--dynamo",),
       dimension=True, report=STACK,
       help="None or a dynamo backend: inductor, openxla, aot_eager, ...; "
            "default: None, inductor, openxla"),
    _f("torch_xla2", EXPERIMENT, str, optional=True, choices=TORCH_XLA2_MODES,
       flags=("--torch-xla2",), dimension=True, report=STACK,
       help="None, torch_export or extract_jax (torchax on JAX)"),
    _f("test", EXPERIMENT, str, choices=TESTS, flags=("--test",), dimension=True, report=COLUMN,
       changes_work=True,
       help="eval (inference) or train (forward, loss, backward)"),
    # The experiment: what is measured on it.
    _f("precision", EXPERIMENT, str, default="fp32", choices=PRECISIONS, flags=("--precision",),
       dimension=True, report=COLUMN, changes_work=True, help="fp32, bf16, fp16 or amp (autocast); default fp32"),
    _f("batch_size", EXPERIMENT, int, default=None, optional=True, minimum=1,
       maximum=MAX_BATCH_SIZE, flags=("--batch-size",), dimension=True, report=PER_EXPERIMENT,
       line_key="requested_batch_size",
       help="batch size; default: the suite's for each model"),
    _f("xla_flags", EXPERIMENT, str, default=None, optional=True, flags=("--xla-flags",),
       dimension=True, report=COLUMN, report_name="flags", baseline_shares=False,
       help="XLA_FLAGS for the child of XLA stacks"),
    _f("matmul_precision", EXPERIMENT, str, default="high", choices=MATMUL_PRECISIONS,
       flags=("--matmul-precision",), implied="highest",
       help="float32 matmul precision, with PyTorch/XLA's runner's meanings: default (one "
            "bf16 pass), high (TF32 on CUDA, three bf16 passes on XLA), highest (full fp32); "
            "set in torch, torch_xla and JAX"),
    _f("disable_tf32", EXPERIMENT, bool, default=False, flags=("--disable-tf32",),
       help="full fp32 in PyTorch's matmuls and convolutions (TF32 is on unless this is "
            "given, as in PyTorch's harness and PyTorch/XLA's runner)"),
    _f("fp16_bf16_reduction_math_sdp", EXPERIMENT, bool, default=True,
       flags=("--disable-fp16-bf16-reduction-math-sdp",), negated_switch=True, implied=False,
       help="full-precision reductions in SDPA's math path for fp16/bf16 (they are reduced "
            "by default, as in PyTorch's harness)"),
    _f("mode", EXPERIMENT, str, default=None, optional=True, choices=INDUCTOR_MODES,
       flags=("--mode",), dimension=True, report=COLUMN, sweep_default=("default",),
       report_default="default", baseline_shares=False,
       help="inductor mode: default, cudagraphs (CUDA only), dynamic (dynamic shapes), "
            "max-autotune; the dashboard tracks default, cudagraphs and dynamic. Default: "
            "default (stacks without modes record none)"),
    _f("enable_functionalization", EXPERIMENT, bool, default=False,
       flags=("--enable-functionalization",),
       help="run PyTorch/XLA with functionalization (otherwise "
            "XLA_DISABLE_FUNCTIONALIZATION=1)"),
    _f("optimizer", EXPERIMENT, str, default=HARNESS_OPTIMIZER, optional=True,
       choices=OPTIMIZERS, flags=("--optimizer",), since=SCHEMA_VERSION, implied=None,
       changes_work=True,
       applies=optimizer_runs,
       inapplicable=None,
       help="training only: the optimizer step after backward: harness (default: as PyTorch's "
            "harness on CUDA, Adam with capturable and foreach at lr 0.01, or SGD for the "
            "models it trains with SGD; none on other devices), none, sgd or adam (lr 1e-3)"),
    _f("amp_dtype", EXPERIMENT, str, default=None, optional=True, choices=AMP_DTYPES,
       flags=("--amp-dtype",), changes_work=True,
       help="autocast dtype for --precision=amp (default bf16 on CPU/TPU, fp16 on CUDA)"),
    _f("fullgraph", EXPERIMENT, bool, default=False, flags=("--filter-by-single-graph",),
       baseline_shares=False, applies=lambda e: e["dynamo"] is not None and e["torch_xla2"] is None,
       help="compile with torch.compile(fullgraph=True), so that a model dynamo splits into "
            "several graphs fails (dynamo stacks)"),
    _f("freezing", EXPERIMENT, bool, default=False, flags=("--freezing",), since=SCHEMA_VERSION,
       baseline_shares=False, applies=lambda e: e["dynamo"] == "inductor" and e["test"] == "eval",
       help="inductor's freezing: weights folded into the compiled graph as constants "
            "(inference with dynamo=inductor; PyTorch's harness --freezing)"),
    _f("stack_options", EXPERIMENT, dict, default=(), baseline_shares=False,
       help="options of the stack that change its results (debug stacks set them)"),
    _f("seed", EXPERIMENT, int, default=DEFAULT_SEED, minimum=SEED_RANGE[0],
       maximum=SEED_RANGE[1], flags=("--seed",), since=SCHEMA_VERSION, changes_work=True,
       help="seed of the weights and the inputs (a 64-bit signed integer)"),
    _f("point", EXPERIMENT, str, default=None, optional=True, pattern=POINT_LABEL,
       flags=("--point",), since=SCHEMA_VERSION, implied=None,
       help="the point of a bisection the experiment measures: a commit or a package version "
            "(experiment-runner bisect sets it), so that each point's lines stay apart"),
    _f("processes", EXPERIMENT, int, default=None, optional=True, minimum=1,
       maximum=MAX_PROCESSES, identity=False, report=NOT_SHOWN, flags=("--processes",),
       help="timing processes per experiment, each with its own warm-up and timed runs; the "
            "figure is the median over processes (how it is measured, not what: not identity). "
            "Default: " + ", ".join(f"{name} {count}" for name, count in DEFAULT_PROCESSES.items())),
    _f("process_caches", EXPERIMENT, str, default="shared", choices=PROCESS_CACHES,
       identity=False, report=NOT_SHOWN, flags=("--process-caches",), since=SCHEMA_VERSION,
       help="with several timing processes: shared (default), the later processes reuse the "
            "first one's compile caches and cost far less; fresh, each compiles from an empty "
            "cache, so that the spread between processes holds the compile's own variation "
            "(inductor's tuning of its kernels) too (how it is measured: not identity)"),
    _f("stack", EXPERIMENT, str, default=None, optional=True, identity=False, report=NOT_SHOWN,
       help="the registry name of the stack that runs it (backends/stacks), set at planning"),
)

_BY_SCOPE: dict[str, tuple[Field, ...]] = {
    scope: tuple(f for f in FIELDS if f.scope == scope) for scope in (MODEL, EXPERIMENT)}
_IDENTITY_BY_SCOPE: dict[str, tuple[Field, ...]] = {
    scope: tuple(f for f in fields if f.identity) for scope, fields in _BY_SCOPE.items()}


def fields_of(scope: str) -> tuple[Field, ...]:
    """The fields of one scope (MODEL or EXPERIMENT), in declaration order."""
    return _BY_SCOPE[scope]


def field_named(scope: str, name: str) -> Field:
    for spec in _BY_SCOPE[scope]:
        if spec.name == name:
            return spec
    raise KeyError(f"no {scope} field {name!r}")


def identity_fields(scope: str) -> tuple[Field, ...]:
    """The identity fields of one scope, in declaration order."""
    return _IDENTITY_BY_SCOPE[scope]


def reported_fields() -> tuple[Field, ...]:
    """The identity fields that show as name=value in a configuration's label (both scopes)."""
    return tuple(f for f in FIELDS if f.identity and f.report == LABEL)


#: reported_fields(), as a constant.
REPORTED: tuple[Field, ...] = reported_fields()




def parse_config(scope: str, data: Any, source: str, ignored: Sequence[str] = ()) -> dict[str, Any]:
    """A config JSON object (--model-config, --experiment-config) as checked field values.

    Keys in `ignored` are dropped; any other unknown key is an error naming it."""
    if not isinstance(data, Mapping):
        raise FieldError(f"{source} must be a JSON object, not {type(data).__name__}")
    known = {f.name: f for f in _BY_SCOPE[scope]}
    unknown = sorted(set(data) - set(known) - set(ignored))
    if unknown:
        raise FieldError(f"{source}: unknown key(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(known))}")
    missing = [spec.name for spec in known.values() if spec.required and spec.name not in data]
    if missing:
        raise FieldError(f"{source}: {' and '.join(missing)} must be given")
    return {name: known[name].check(value, source) for name, value in data.items()
            if name in known}


def resolved_identity(scope: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every identity field of `scope` with its value as JSON: the value given, else the
    value a config (or a line) that does not name it implies; where the field does not
    apply (its `applies`), the value it takes there."""
    given = {spec.name: values[spec.name] if spec.name in values else spec.implied_value
             for spec in _BY_SCOPE[scope]}
    identity = {}
    for spec in identity_fields(scope):
        value = given[spec.name]
        if spec.applies is not None and not spec.applies(given):
            # Where a field does not apply, every value of it is the same experiment (an
            # optimizer in eval, fullgraph without dynamo), as planning makes it.
            value = spec.inapplicable_value
        identity[spec.name] = spec.to_json(value)
    return identity


def line_values(scope: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A results line's model or experiment object as field values (by field name).

    A field whose line key differs (the requested batch size) is read from it where the line
    has it; lines without `requested_batch_size` (written before it) held the requested
    batch size in `batch_size`."""
    values = {}
    for spec in _BY_SCOPE[scope]:
        if spec.key in data:
            values[spec.name] = data[spec.key]
        elif spec.line_key and spec.name in data:
            values[spec.name] = data[spec.name]
    return values


def processes_for(accelerator: str, processes: Optional[int]) -> int:
    """The timing processes of an experiment: those asked for, else its accelerator's default."""
    return processes if processes is not None else DEFAULT_PROCESSES.get(accelerator, 1)


def flagged_fields() -> tuple[Field, ...]:
    """Fields with a command-line flag, in declaration order."""
    return tuple(f for f in FIELDS if f.flags)
