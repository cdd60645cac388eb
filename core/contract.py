"""The contract between the parent and a child: `ChildSpec` in, `ChildResult` out.

The parent writes the spec into the child's own folder; the child reads nothing else (no
side-channel environment variables: only those its stack and observers declare) and
writes its result there. `write_message` and `read_message` serialize both.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, TypeVar, Union

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.schema import Status, Verdict

SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
LOG_FILE = "child.log"
#: Where a child that shares its GPU keeps its waits for the card, for its timeout to leave
#: them out: "<seconds waited> <epoch when the current wait began, or ->"
#: (child/device_gate.py writes it, runner/run/process/supervision.py reads it).
GATE_WAITS_FILE = "gate_waits.txt"


class Role(str, enum.Enum):
    """What a child does: time the experiment, or verify it against eager."""

    TIME = "time"
    VERIFY = "verify"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ChildSpec:
    """Everything a child is told."""

    model: ModelConfig
    experiment: ExperimentConfig
    settings: RunSettings
    role: Role
    #: The child's own folder (absolute): its spec, log, result and dumps go here.
    folder: str
    log_level: str = "WARNING"
    #: The CPU cores the child runs on (its threads default to one per core); () = any.
    cpu_set: tuple[int, ...] = ()
    #: Whether the compile caches already hold this experiment's compiles (a timing process
    #: after the first, with the caches shared): inductor then starts no compile workers.
    warm_caches: bool = False
    #: A CUDA child's GPU's lock file, through which it takes turns on the card with every
    #: other child there, of its runner's slots or of other runners (child/device_gate.py).
    device_gate: Optional[str] = None
    #: The runner's temporary folder (the child's TMPDIR is the runner's scratch): inductor's
    #: precompiled C++ headers go under it, where torch keeps them for every process.
    host_temp_dir: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "experiment": self.experiment.to_dict(),
            "settings": self.settings.to_dict(),
            "role": self.role.value,
            "folder": self.folder,
            "log_level": self.log_level,
            "cpu_set": list(self.cpu_set),
            "warm_caches": self.warm_caches,
            "device_gate": self.device_gate,
            "host_temp_dir": self.host_temp_dir,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ChildSpec":
        return cls(
            model=ModelConfig.from_dict(data["model"]),
            experiment=ExperimentConfig.from_dict(data["experiment"]),
            settings=RunSettings.from_dict(data["settings"]),
            role=Role(data["role"]),
            folder=data["folder"],
            log_level=data.get("log_level", "WARNING"),
            cpu_set=tuple(int(core) for core in data.get("cpu_set") or ()),
            warm_caches=bool(data.get("warm_caches", False)),
            device_gate=data.get("device_gate"),
            host_temp_dir=data.get("host_temp_dir"),
        )


@dataclass(frozen=True)
class ChildError:
    """An exception the child caught: type and message, and its traceback; `host_cause`
    says why it is the host's failure rather than the experiment's (a full disk, a warnings
    filter that turns warnings into errors), None where it is the experiment's."""

    exception: str
    traceback: str = ""
    host_cause: Optional[str] = None


@dataclass
class ChildResult:
    """Everything a child hands back: `metrics` holds per-run lists (the line's `metrics`),
    `summary` the figures of the whole experiment (the line's `summary`)."""

    status: Status = Status.FAILED
    metrics: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    batch_size_used: Optional[int] = None
    accelerator_model: Optional[str] = None
    verdict: Optional[Verdict] = None
    error: Optional[ChildError] = None
    skip_reason: Optional[str] = None
    #: What one iteration ran (child.workload), or None when the child did not get
    #: as far as loading the model.
    workload: Optional[dict[str, Any]] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "metrics": self.metrics,
            "summary": self.summary,
            "notes": self.notes,
            "environment": self.environment,
            "batch_size_used": self.batch_size_used,
            "accelerator_model": self.accelerator_model,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "error": ({"exception": self.error.exception, "traceback": self.error.traceback,
                       "host_cause": self.error.host_cause} if self.error else None),
            "skip_reason": self.skip_reason,
            "workload": self.workload,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ChildResult":
        error = data.get("error")
        verdict = data.get("verdict")
        return cls(
            status=Status(data["status"]),
            metrics=dict(data.get("metrics") or {}),
            summary=dict(data.get("summary") or {}),
            notes=list(data.get("notes") or []),
            environment=dict(data.get("environment") or {}),
            batch_size_used=data.get("batch_size_used"),
            accelerator_model=data.get("accelerator_model"),
            verdict=Verdict.from_dict(verdict) if verdict else None,
            error=(ChildError(error["exception"], error.get("traceback", ""),
                              error.get("host_cause")) if error else None),
            skip_reason=data.get("skip_reason"),
            workload=data.get("workload"),
        )


Message = TypeVar("Message", ChildSpec, ChildResult)


def write_message(path: Union[str, Path], message: Union[ChildSpec, ChildResult]) -> None:
    """Write a spec or a result as JSON, atomically (a reader never sees half of it, and a
    failed write leaves nothing behind but raises)."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    try:
        temporary.write_text(json.dumps(message.to_dict(), indent=1, default=str), encoding="utf-8")
        os.replace(temporary, path)
    except BaseException as error:
        # A full disk or a file-size limit leaves neither a partial file nor an empty one.
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and not error.filename:
            # A write that fails on close (ENOSPC at the flush) names no file: name it.
            raise OSError(error.errno, error.strerror or str(error), str(path)) from error
        raise


def read_message(path: Union[str, Path], kind: type[Message]) -> Message:
    """Read what `write_message` wrote; ValueError when it is not a valid `kind`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return kind.from_dict(data)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a valid {kind.__name__}: {error}") from error
