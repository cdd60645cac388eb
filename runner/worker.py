"""The child process: load one model, prepare it on one stack, time it, hand back a result.

Run as `python -m runner.worker SPEC_JSON RESULT_JSON`. The spec holds the model, the
experiment and the run settings; the result is written atomically to RESULT_JSON, and the
parent alone turns it into a results line.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import resource
import signal
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.config import ExperimentConfig, ModelConfig, RunSettings

log = logging.getLogger("runner.worker")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything the child is told."""

    model: ModelConfig
    experiment: ExperimentConfig
    settings: RunSettings
    experiment_dir: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "experiment": self.experiment.to_dict(),
            "settings": self.settings.to_dict(),
            "experiment_dir": self.experiment_dir,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WorkerSpec":
        return cls(
            model=ModelConfig.from_dict(data["model"]),
            experiment=ExperimentConfig.from_dict(data["experiment"]),
            settings=RunSettings.from_dict(data["settings"]),
            experiment_dir=data["experiment_dir"],
        )


class ModelCannotRun(Exception):
    """The model does not support this configuration: a skip, not a failure."""


def environment_record() -> dict[str, Any]:
    """What a reader needs to trust and reproduce a line."""
    from runner.probe import installed_packages

    packages = installed_packages()
    record: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "packages": packages,
        "torch": packages.get("torch"),
    }
    for name in ("torch_xla", "torchax", "jax"):
        if name in packages:
            record[name] = packages[name]
    variables = ("PJRT_DEVICE", "XLA_FLAGS", "JAX_PLATFORMS", "XLA_DISABLE_FUNCTIONALIZATION",
                 "CUDA_VISIBLE_DEVICES", "EXPERIMENT_RUNNER_SMALL_MODELS", "TORCHBENCH_DIR")
    record["variables"] = {name: os.environ[name] for name in variables if name in os.environ}
    return record


def run_experiment(spec: WorkerSpec, result: dict[str, Any]) -> None:
    """Load and prepare, then time or (with verify_only) verify, filling `result`."""
    import torch

    import backends
    from models import get_suite
    from runner.observers.session import ExperimentObservers
    from runner.timing import measure

    torch.manual_seed(spec.settings.seed)
    torch.set_float32_matmul_precision(spec.experiment.matmul_precision)
    # "highest" means full fp32 for convolutions too, not only matmuls.
    torch.backends.cudnn.allow_tf32 = spec.experiment.matmul_precision != "highest"
    suite = get_suite(spec.model.suite_name)
    try:
        bench = suite.load(spec.model.model_name, spec.experiment.test, spec.experiment.batch_size)
    except NotImplementedError as error:
        raise ModelCannotRun(f"{spec.model.model_name} does not implement {spec.experiment.test}: "
                             f"{error}") from error
    backend = backends.backend_for(spec.experiment)
    if backend is None:
        raise RuntimeError(backends.no_backend_reason(spec.experiment))
    result.update(batch_size_used=bench.batch_size, backend=backend.name)
    result["environment"]["torch_settings"] = torch_settings()
    if spec.settings.verify_only:
        # Verification runs in a child of its own (see executor), never after timing: a
        # stack like torchax changes the process so that eager references would break.
        result.update(verification_fields(spec, suite, backend, bench.nondeterministic_reason))
        return
    observers = ExperimentObservers(spec.experiment, spec.settings, Path(spec.experiment_dir))
    result["notes"] = observers.notes
    for note in observers.notes:
        log.warning("%s", note)
    log.info("preparing %s on %s", spec.model.model_name, backend.name)
    prepared = backend.prepare(bench, spec.experiment, spec.settings)
    observers.attach(prepared)
    timing = measure(prepared, bench, spec.settings, observers)
    metrics = timing.metrics()
    metrics.update(prepared.final_metrics())
    metrics.update(observers.metrics())
    result["metrics"] = metrics
    result["accelerator_model"] = prepared.accelerator_model()


def verification_fields(spec: WorkerSpec, suite, backend, nondeterministic_reason) -> dict[str, Any]:
    """The verifier's code, reason and details; a crash of the verifier itself is reported."""
    from runner.verification import verify_experiment

    try:
        verdict = verify_experiment(spec.model, spec.experiment, spec.settings, suite, backend,
                                    nondeterministic_reason)
    except Exception as error:
        log.exception("the verifier could not run")
        return {"verification_code": "VERIFIER_DIDNT_RUN",
                "verification_reason": f"the verifier could not run: {type(error).__name__}: {error}"}
    return {
        "verification_code": verdict.code.value,
        "verification_reason": verdict.reason,
        "verification_details": verdict.to_dict().get("details", {}),
    }


def torch_settings() -> dict[str, Any]:
    """Numerics switches that change what a matmul computes."""
    import torch

    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "num_threads": torch.get_num_threads(),
    }


def max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_result(path: Path, result: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(result, default=str), encoding="utf-8")
    os.replace(temporary, path)


def die_with_parent() -> None:
    """Ask Linux to kill this child when the runner dies (a SIGKILLed runner leaves no
    orphan experiment behind). Elsewhere this is a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        log.debug("could not ask to die with the parent")


def main(argv: list[str]) -> int:
    die_with_parent()
    logging.basicConfig(
        level=os.environ.get("EXPERIMENT_RUNNER_LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = WorkerSpec.from_dict(json.loads(spec_path.read_text(encoding="utf-8")))
    result: dict[str, Any] = {"environment": environment_record()}
    try:
        run_experiment(spec, result)
        result["status"] = "ok"
    except ModelCannotRun as skip:
        result["status"] = "skipped"
        result["skip_reason"] = str(skip)
    except BaseException as error:  # everything the child hits is reported, not lost
        result["status"] = "failed"
        result["exception"] = f"{type(error).__name__}: {error}"
        result["traceback"] = traceback.format_exc()
    result.setdefault("metrics", {})["child_max_rss_bytes"] = max_rss_bytes()
    write_result(result_path, result)
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
