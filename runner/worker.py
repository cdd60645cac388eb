"""The child process: load one model, prepare it on its stack, time or verify it.

Run as `python -m runner.worker FOLDER`. FOLDER is the child's own folder: the parent wrote
`spec.json` (a `ChildSpec`) there, and the child writes `result.json` (a `ChildResult`)
there, atomically; its dumps go there too. The parent alone turns the result into a line.
"""

from __future__ import annotations

import logging
import os
import platform
import resource
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from core.contract import (
    RESULT_FILE,
    SPEC_FILE,
    ChildError,
    ChildResult,
    ChildSpec,
    Role,
    read_message,
    write_message,
)
from core.schema import Status, Verdict

log = logging.getLogger("runner.worker")

#: Exit status when the result cannot be written (runner.executor.CHILD_OUTPUT_FAILED).
EXIT_OUTPUT_FAILED = 74

#: Variables recorded with every line, so a reader can trust and reproduce it.
RECORDED_VARIABLES = ("PJRT_DEVICE", "XLA_FLAGS", "JAX_PLATFORMS", "XLA_DISABLE_FUNCTIONALIZATION",
                      "CUDA_VISIBLE_DEVICES")


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
    record["variables"] = {name: os.environ[name] for name in RECORDED_VARIABLES
                           if name in os.environ}
    return record


def run_child(spec: ChildSpec, result: ChildResult) -> None:
    """Load and prepare, then time or verify as the spec's role says, filling `result`."""
    import torch

    import backends
    from models import get_suite

    model, experiment, settings = spec.model, spec.experiment, spec.settings
    torch.manual_seed(settings.seed)
    torch.set_float32_matmul_precision(experiment.matmul_precision)
    # "highest" means full fp32 for convolutions too, not only matmuls.
    torch.backends.cudnn.allow_tf32 = experiment.matmul_precision != "highest"
    suite = get_suite(model.suite_name, reduced=model.reduced, torchbench_dir=model.torchbench_dir)
    try:
        bench = suite.load(model.model_name, experiment.test, experiment.batch_size)
    except NotImplementedError as error:
        raise ModelCannotRun(f"{model.model_name} does not implement {experiment.test}: "
                             f"{error}") from error
    stack = backends.get_stack(experiment.stack)
    result.batch_size_used = bench.batch_size
    result.environment["torch_settings"] = torch_settings()
    if spec.role is Role.VERIFY:
        # Verification runs in a child of its own (see executor), never after timing: a
        # stack like torchax changes the process so that eager references would break.
        result.verdict = verification_verdict(spec, suite, stack, bench.nondeterministic_reason)
        return
    time_experiment(spec, stack, bench, result)


def time_experiment(spec: ChildSpec, stack, bench, result: ChildResult) -> None:
    from runner.observers.session import ExperimentObservers
    from runner.timing import measure

    observers = ExperimentObservers(stack, spec.experiment, spec.settings, Path(spec.folder))
    result.notes = observers.notes
    for note in observers.notes:
        log.warning("%s", note)
    log.info("preparing %s on %s", spec.model.model_name, stack.name)
    prepared = stack.prepare(bench, spec.experiment, spec.settings)
    observers.attach(prepared)
    timing = measure(prepared, bench, spec.settings, observers)
    result.metrics.update(timing.metrics())
    result.metrics.update(prepared.final_metrics())
    result.metrics.update(observers.metrics())
    result.accelerator_model = prepared.accelerator_model()


def verification_verdict(spec: ChildSpec, suite, stack, nondeterministic_reason) -> Verdict:
    """The verifier's verdict; a crash of the verifier itself is reported as its reason."""
    from runner.verification import verify_experiment

    try:
        return verify_experiment(spec.model, spec.experiment, spec.settings, suite, stack,
                                 nondeterministic_reason)
    except Exception as error:
        log.exception("the verifier could not run")
        return Verdict.didnt_run(f"the verifier could not run: {type(error).__name__}: {error}")


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


def die_with_parent() -> None:
    """Ask Linux to kill this child when the runner dies (a SIGKILLed runner leaves no
    orphan experiment behind), and to adopt its orphaned descendants, so that killing this
    child's tree finds them too (the runner's guard kills them if the runner dies).
    Elsewhere this is a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        log.debug("could not ask to die with the parent")


def main(argv: list[str]) -> int:
    die_with_parent()
    folder = Path(argv[0])
    spec = read_message(folder / SPEC_FILE, ChildSpec)
    logging.basicConfig(level=spec.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = ChildResult(environment=environment_record())
    try:
        run_child(spec, result)
        result.status = Status.OK
    except ModelCannotRun as skip:
        result.status = Status.SKIPPED
        result.skip_reason = str(skip)
    except BaseException as error:  # everything the child hits is reported, not lost
        result.status = Status.FAILED
        result.error = ChildError(f"{type(error).__name__}: {error}", traceback.format_exc())
    result.metrics["child_max_rss_bytes"] = max_rss_bytes()
    try:
        write_message(folder / RESULT_FILE, result)
    except OSError as error:  # a full disk: the parent stops the sweep with this line
        print(f"cannot write {folder / RESULT_FILE}: {error.strerror or error}", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    return 0 if result.status is Status.OK else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
