"""Configuration dataclasses shared by the parent and the child.

`ModelConfig` and `ExperimentConfig` identify an experiment; their fingerprint is the
digest of their canonical JSON, identical in every process and every run.
`RunSettings` says how an experiment is measured and never enters the fingerprint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

ACCELERATORS = ("cpu", "cuda", "tpu")
XLA_MODES = (None, "PJRT")
TORCH_XLA2_MODES = (None, "torch_export", "extract_jax")
TESTS = ("eval", "train")
PRECISIONS = ("fp32", "bf16", "fp16", "amp")
MATMUL_PRECISIONS = ("highest", "high", "medium")
DEFAULT_DYNAMO = (None, "inductor", "openxla")
IR_FORMATS = ("text", "hlo", "stablehlo")


def none_if_none_string(value: Optional[str]) -> Optional[str]:
    """Map the command-line spelling 'None' (any case) to Python's None."""
    if value is None or value.strip().lower() in ("none", ""):
        return None
    return value


@dataclass(frozen=True)
class ModelConfig:
    """Which model of which suite."""

    suite_name: str
    model_name: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        return cls(suite_name=data["suite_name"], model_name=data["model_name"])


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
    matmul_precision: str = "highest"
    enable_functionalization: bool = False
    optimizer: Optional[str] = None
    amp_dtype: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ExperimentConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def stack_label(self) -> str:
        """Short human label of the execution stack, e.g. 'PJRT+openxla' or 'inductor'."""
        if self.torch_xla2:
            return f"torchax:{self.torch_xla2}"
        parts = [p for p in (self.xla, self.dynamo) if p]
        return "+".join(parts) if parts else "eager"

    def describe(self) -> str:
        text = (
            f"{self.accelerator} xla={self.xla} dynamo={self.dynamo} "
            f"torch_xla2={self.torch_xla2} test={self.test} precision={self.precision}"
        )
        if self.batch_size is not None:
            text += f" batch_size={self.batch_size}"
        if self.xla_flags:
            text += f" xla_flags={self.xla_flags!r}"
        return text


@dataclass(frozen=True)
class RunSettings:
    """How each experiment is run and measured (not part of its identity)."""

    repeat: int = 10
    iterations_per_run: int = 1
    warmup: int = 3
    randomize_input: bool = False
    seed: int = 1234
    verify: bool = False
    verify_only: bool = False
    verify_iterations: int = 1
    # Observability (runner/observers): what is collected or dumped besides the timings.
    collect_dynamo_counters: bool = False
    dump_dynamo_counters: bool = False
    profile_cuda_cpu: bool = False
    profile_individual_ops: bool = False
    dump_pytorch_profiles: bool = False
    dump_pytorch_xla_metrics: bool = False
    dump_hlo: bool = False
    save_ir_format: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.save_ir_format is not None and self.save_ir_format not in IR_FORMATS:
            raise ValueError(
                f"save_ir_format {self.save_ir_format!r} is not one of {', '.join(IR_FORMATS)}"
            )

    @property
    def profiled_runs(self) -> bool:
        """Whether profiled runs follow the timed runs."""
        return self.profile_cuda_cpu or self.profile_individual_ops or self.dump_pytorch_profiles

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSettings":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def fingerprint(model: ModelConfig, experiment: ExperimentConfig) -> str:
    """Stable digest of model + experiment, the key used to resume."""
    payload = canonical_json({"model": model.to_dict(), "experiment": experiment.to_dict()})
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def fingerprint_of_line(line: dict[str, Any]) -> Optional[str]:
    """Fingerprint of a results line, recomputed from its model and experiment."""
    try:
        model = ModelConfig.from_dict(line["model"])
        experiment = ExperimentConfig.from_dict(line["experiment"])
    except (KeyError, TypeError):
        return None
    return fingerprint(model, experiment)


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def safe_component(text: str) -> str:
    """A path-safe rendering of one piece of an experiment id (never '.' or '..')."""
    cleaned = _UNSAFE.sub("_", text).strip("._") or "_"
    return cleaned[:60]


def experiment_id(model: ModelConfig, experiment: ExperimentConfig) -> str:
    """Readable, path-safe, unique id: model and configuration, then a digest prefix."""
    parts = [
        model.suite_name,
        model.model_name,
        experiment.accelerator,
        experiment.stack_label().replace(":", "-"),
        experiment.test,
        experiment.precision,
    ]
    if experiment.batch_size is not None:
        parts.append(f"bs{experiment.batch_size}")
    readable = "-".join(safe_component(str(p)) for p in parts)
    return f"{readable}-{fingerprint(model, experiment)[:10]}"
