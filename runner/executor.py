"""Run one experiment in an isolated child and turn whatever happened into a results line.

The child gets a fresh interpreter (no dynamo cache, XLA client or CUDA context carried
over) in a process session of its own. A timeout, a memory limit or Ctrl-C kills the whole
process tree, grandchildren included.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Optional

import psutil

import backends
from runner.config import RunSettings
from runner.matrix import PlannedExperiment
from runner.observers.layout import clear_dumps
from runner.observers.rules import observability_environment
from runner.results import STATUS_FAILED, STATUS_OK, STATUS_SKIPPED, bounded, make_line

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUTPUT_TAIL_CHARS = 2500
POLL_SECONDS = 0.1
EXIT_GRACE_SECONDS = 60.0

OFFLINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class ExecutorOptions:
    """How children are run and watched."""

    output_dir: Path
    timeout_seconds: float = 1800.0
    memory_limit_bytes: Optional[int] = None
    print_subprocess: bool = False
    log_level: str = "WARNING"
    extra_environment: dict[str, str] = field(default_factory=dict)


@dataclass
class ChildOutcome:
    """What the parent saw of one child."""

    returncode: Optional[int] = None
    result: Optional[dict[str, Any]] = None
    timed_out: bool = False
    memory_exceeded: bool = False
    peak_tree_rss_bytes: int = 0
    wall_seconds: float = 0.0
    output_tail: str = ""
    notes: list[str] = field(default_factory=list)


def kill_tree(pid: int) -> None:
    """Kill a process, its process group and every descendant still known."""
    try:
        root = psutil.Process(pid)
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        processes = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=5)


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    try:
        root = psutil.Process(pid)
        processes = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def describe_exit(returncode: Optional[int]) -> str:
    if returncode is None:
        return "the child did not exit"
    if returncode >= 0:
        return f"the child exited with status {returncode} without a result"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    text = f"the child was killed by {name}"
    if name == "SIGSEGV":
        text += " (segmentation fault)"
    elif name == "SIGKILL":
        text += " (the kernel's out-of-memory killer sends this)"
    return text


def _pump(stream: IO[bytes], log_file: IO[bytes], echo: bool) -> None:
    for chunk in iter(stream.readline, b""):
        log_file.write(chunk)
        log_file.flush()
        if echo:
            sys.stderr.write(chunk.decode("utf-8", "replace"))
            sys.stderr.flush()


def read_tail(path: Path, limit: int = OUTPUT_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


class ExperimentExecutor:
    """Runs planned experiments one at a time, each in its own child."""

    def __init__(self, options: ExecutorOptions, settings: RunSettings) -> None:
        self.options = options
        self.settings = settings
        self._notes_logged: set[str] = set()

    def experiment_dir(self, planned: PlannedExperiment) -> Path:
        """The experiment's folder, absolute: the child runs inside it."""
        return (self.options.output_dir / planned.experiment_id).resolve()

    def child_environment(
        self, planned: PlannedExperiment, scratch: Path, settings: RunSettings
    ) -> dict[str, str]:
        environment = dict(os.environ)
        environment.update(OFFLINE_ENVIRONMENT)
        python_path = [str(PROJECT_ROOT)]
        if environment.get("PYTHONPATH"):
            python_path.append(environment["PYTHONPATH"])
        environment["PYTHONPATH"] = os.pathsep.join(python_path)
        environment["EXPERIMENT_RUNNER_LOG_LEVEL"] = self.options.log_level
        environment.update(self.options.extra_environment)
        # A fresh compile cache per child keeps cold-start latency honest.
        environment["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
        environment["TRITON_CACHE_DIR"] = str(scratch / "triton")
        backend = backends.backend_for(planned.experiment)
        if backend is not None:
            environment.update(backend.child_environment(planned.experiment, settings))
        environment.update(observability_environment(
            planned.experiment, settings, self.experiment_dir(planned), environment))
        return environment

    def run_child(
        self, planned: PlannedExperiment, settings: RunSettings, role: str = ""
    ) -> ChildOutcome:
        """Start a child, watch it, and collect its result and output.

        `role` tells apart the files of the verification child ("verify") from the timing
        child's (""), both in the experiment's folder.
        """
        from runner.worker import WorkerSpec

        directory = self.experiment_dir(planned)
        directory.mkdir(parents=True, exist_ok=True)
        suffix = f"_{role}" if role else ""
        if not role:
            clear_dumps(directory)
        spec_path = directory / f"spec{suffix}.json"
        result_path = directory / f"child_result{suffix}.json"
        log_path = directory / f"child{suffix}.log"
        result_path.unlink(missing_ok=True)
        spec = WorkerSpec(planned.model, planned.experiment, settings, str(directory))
        spec_path.write_text(json.dumps(spec.to_dict(), indent=1), encoding="utf-8")
        scratch = Path(tempfile.mkdtemp(prefix="experiment-runner-"))
        outcome = ChildOutcome()
        start = time.monotonic()
        with open(log_path, "wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", "runner.worker", str(spec_path), str(result_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=self.child_environment(planned, scratch, settings),
                cwd=str(directory),
                start_new_session=True,
            )
            pump = threading.Thread(
                target=_pump, args=(process.stdout, log_file, self.options.print_subprocess),
                daemon=True,
            )
            pump.start()
            try:
                self._watch(process, result_path, outcome, start)
            finally:
                kill_tree(process.pid)
                process.wait()
                pump.join(timeout=5)
                shutil.rmtree(scratch, ignore_errors=True)
        outcome.returncode = process.returncode
        outcome.wall_seconds = time.monotonic() - start
        outcome.output_tail = read_tail(log_path)
        if result_path.exists():
            try:
                outcome.result = json.loads(result_path.read_text(encoding="utf-8"))
            except ValueError:
                outcome.notes.append("the child's result file was not valid JSON")
        return outcome

    def _watch(
        self, process: subprocess.Popen, result_path: Path, outcome: ChildOutcome, start: float
    ) -> None:
        result_seen_at: Optional[float] = None
        while process.poll() is None:
            now = time.monotonic()
            rss = tree_rss_bytes(process.pid)
            outcome.peak_tree_rss_bytes = max(outcome.peak_tree_rss_bytes, rss)
            limit = self.options.memory_limit_bytes
            if limit and rss > limit:
                outcome.memory_exceeded = True
                outcome.notes.append(
                    f"the child's process tree used {rss / 2**20:.0f} MiB, over the memory "
                    f"limit of {limit / 2**20:.0f} MiB, and was killed"
                )
                return
            if now - start > self.options.timeout_seconds:
                outcome.timed_out = True
                outcome.notes.append(
                    f"the child ran past the timeout of {self.options.timeout_seconds:g} s; "
                    "its whole process tree was killed"
                )
                return
            if result_seen_at is None and result_path.exists():
                result_seen_at = now
            elif result_seen_at is not None and now - result_seen_at > EXIT_GRACE_SECONDS:
                outcome.notes.append(
                    f"the child wrote its result but did not exit within "
                    f"{EXIT_GRACE_SECONDS:g} s; it was killed"
                )
                return
            time.sleep(POLL_SECONDS)

    def run(self, planned: PlannedExperiment, run_fields: dict[str, Any]) -> dict[str, Any]:
        """Run one experiment and return its results line (never raises for the child).

        Timing and verification run in separate children: verification needs eager
        references in a process that no other stack has touched.
        """
        settings = self.settings
        if settings.verify_only:
            outcome = self.run_child(planned, settings, "verify")
            self._log_child_notes(outcome)
            return line_from_outcome(planned, settings, outcome, run_fields)
        outcome = self.run_child(planned, replace(settings, verify=False))
        self._log_child_notes(outcome)
        line = line_from_outcome(planned, settings, outcome, run_fields)
        if settings.verify:
            verification = self.run_child(planned, replace(settings, verify_only=True), "verify")
            apply_verification(line, verification)
        return line

    def _log_child_notes(self, outcome: ChildOutcome) -> None:
        """Warn about each distinct note of the children once per sweep."""
        for note in (outcome.result or {}).get("notes", []):
            if note not in self._notes_logged:
                self._notes_logged.add(note)
                log.warning("%s", note)


def line_from_outcome(
    planned: PlannedExperiment,
    settings: RunSettings,
    outcome: ChildOutcome,
    run_fields: dict[str, Any],
) -> dict[str, Any]:
    """The results line for a child's outcome, success or any kind of failure."""
    result = outcome.result or {}
    metrics = dict(result.get("metrics", {}))
    peak = max(outcome.peak_tree_rss_bytes, int(metrics.get("child_max_rss_bytes", 0)))
    if peak:
        metrics["peak_host_memory_bytes"] = peak
    metrics["wall_time"] = outcome.wall_seconds
    if result.get("status") == STATUS_SKIPPED:
        extra = dict(run_fields, experiment_id=planned.experiment_id,
                     skip_reason=result.get("skip_reason"))
        return make_line(planned.model, planned.experiment, settings, metrics=metrics,
                         status=STATUS_SKIPPED, verification_code="VERIFIER_SKIPPED",
                         environment=result.get("environment"), extra=extra)
    succeeded = (
        result.get("status") == STATUS_OK
        and not outcome.timed_out
        and not outcome.memory_exceeded
    )
    if not succeeded:
        metrics["error"] = failure_text(outcome)
    extra = dict(run_fields)
    extra["experiment_id"] = planned.experiment_id
    for key in ("batch_size_used", "verification_reason", "verification_details"):
        if key in result:
            extra[key] = result[key]
    notes = list(result.get("notes", [])) + (outcome.notes if succeeded else [])
    if notes:
        extra["notes"] = notes
    return make_line(
        planned.model,
        planned.experiment,
        settings,
        metrics=metrics,
        status=STATUS_OK if succeeded else STATUS_FAILED,
        verification_code=verification_code(result, succeeded),
        accelerator_model=result.get("accelerator_model"),
        environment=result.get("environment"),
        extra=extra,
    )


def apply_verification(line: dict[str, Any], verification: ChildOutcome) -> None:
    """Put the verification child's code and reason into a timing line."""
    result = verification.result or {}
    if "verification_code" in result:
        line["verification_code"] = result["verification_code"]
        line["verification_reason"] = result.get("verification_reason")
        line["verification_details"] = result.get("verification_details", {})
    else:
        line["verification_code"] = "VERIFIER_DIDNT_RUN"
        line["verification_reason"] = failure_text(verification)


def verification_code(result: dict[str, Any], succeeded: bool) -> str:
    """The verifier's code where it ran; otherwise SKIPPED, or DIDNT_RUN for a failure."""
    if "verification_code" in result:
        return result["verification_code"]
    return "VERIFIER_SKIPPED" if succeeded else "VERIFIER_DIDNT_RUN"


def failure_text(outcome: ChildOutcome) -> str:
    """A bounded, readable account: what happened, the exception, the output's tail."""
    result = outcome.result or {}
    parts = list(outcome.notes)
    if result.get("status") == STATUS_FAILED:
        parts.append(f"the experiment raised {result.get('exception', 'an exception')}")
        if result.get("traceback"):
            parts.append("traceback:\n" + bounded(result["traceback"], 1500))
    elif not outcome.timed_out and not outcome.memory_exceeded:
        parts.append(describe_exit(outcome.returncode))
    if outcome.output_tail:
        parts.append("last output of the child:\n" + outcome.output_tail)
    return bounded("\n".join(parts))
