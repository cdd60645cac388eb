"""Run one experiment in an isolated child and turn whatever happened into a results line.

The child gets a fresh interpreter (no dynamo cache, XLA client or CUDA context carried
over) in a process session of its own. A timeout, a memory limit or Ctrl-C kills the whole
process tree, grandchildren included; if the runner itself is killed, its guard
(runner/guard.py) does. Compile caches go to a fresh folder under the runner's scratch
root (runner/scratch.py).

A write the parent cannot make (the child's folder, spec or log: a full disk, a file-size
limit, an unusable output folder) raises OSError naming the file; so does a child that
could not write its result (`CHILD_OUTPUT_FAILED`). The sweep stops there: nothing can be
recorded on a full disk.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Mapping, Optional

import psutil

import backends
from core.config import RunSettings
from core.contract import (
    LOG_FILE,
    RESULT_FILE,
    SPEC_FILE,
    ChildResult,
    ChildSpec,
    Role,
    read_message,
    write_message,
)
from core.schema import ResultLine, Status, Verdict, VerificationCode, bounded
from runner.forkserver import ForkedChild, ForkServer, ForkServerError, ForkServers, names_own_folder
from runner.guard import ProcessGuard
from runner.matrix import PlannedExperiment
from runner.observers import observability_environment
from runner.scratch import ScratchRoot
from runner.slots import Slot

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
OUTPUT_TAIL_CHARS = 2500
POLL_SECONDS = 0.1
EXIT_GRACE_SECONDS = 60.0
#: The worker's exit status when it cannot write its result (sysexits' EX_IOERR).
CHILD_OUTPUT_FAILED = 74

#: The runner's own variables never reach a child: it reads its spec, nothing else.
RUNNER_VARIABLE_PREFIX = "EXPERIMENT_RUNNER_"

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
    #: Cores the children are pinned to; () means this process's own CPU set.
    cpu_set: tuple[int, ...] = ()
    #: "spawn": a fresh interpreter per child; "forkserver": children forked from a server
    #: that preloaded the stack's libraries (runner/forkserver.py).
    start_method: str = "spawn"

    def child_cpu_set(self) -> tuple[int, ...]:
        return self.cpu_set or tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class SweepInfo:
    """What every line of one runner invocation shares.

    `timestamp` is the sweep's start (or --timestamp), as PyTorch/XLA's runner writes it;
    `accelerator_models` names each accelerator's device as the parent's probe knows it,
    for lines whose child never reported one (skipped, failed early)."""

    run_id: str
    command: str = ""
    timestamp: float = field(default_factory=time.time)
    accelerator_models: Mapping[str, Optional[str]] = field(default_factory=dict)


@dataclass
class ChildOutcome:
    """What the parent saw of one child."""

    folder: Path
    returncode: Optional[int] = None
    result: Optional[ChildResult] = None
    timed_out: bool = False
    memory_exceeded: bool = False
    peak_tree_rss_bytes: int = 0
    wall_seconds: float = 0.0
    output_tail: str = ""
    notes: list[str] = field(default_factory=list)


class ExperimentCancelled(KeyboardInterrupt):
    """The sweep was stopped (Ctrl-C, a fatal error) while this child ran; it was killed."""


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


class _Pump:
    """Copies the child's output to its log; a failed write (full disk) is kept, and the
    output is still drained so the child never blocks on a full pipe."""

    def __init__(self, stream: IO[bytes], log_file: IO[bytes], echo: bool) -> None:
        self.stream, self.log_file, self.echo = stream, log_file, echo
        self.error: Optional[OSError] = None
        self.tail: collections.deque[bytes] = collections.deque(maxlen=40)

    def run(self) -> None:
        for chunk in iter(self.stream.readline, b""):
            self.tail.append(chunk[-OUTPUT_TAIL_CHARS:])
            if self.error is None:
                try:
                    self.log_file.write(chunk)
                except OSError as error:
                    self.error = error
            if self.echo:
                sys.stderr.write(chunk.decode("utf-8", "replace"))
                sys.stderr.flush()

    def last_line(self) -> str:
        lines = b"".join(self.tail).decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""


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
    """Runs planned experiments one at a time, each in children of its own."""

    def __init__(self, options: ExecutorOptions, settings: RunSettings, sweep: SweepInfo,
                 guard: Optional[ProcessGuard] = None,
                 scratch: Optional[ScratchRoot] = None) -> None:
        self.options = options
        self.settings = settings
        self.sweep = sweep
        self.guard = guard
        self.scratch = scratch or ScratchRoot()
        self._notes_logged: set[str] = set()
        self._cancelled = threading.Event()
        self._servers = ForkServers(on_start=self._watch_server)
        self._fork_failure_told = False

    def start(self) -> None:
        """Start the guard and make the scratch root it removes however the runner ends."""
        if self.guard is not None:
            self.guard.start()
            self.guard.remove_on_exit(self.scratch.create())

    def close(self) -> None:
        """Stop the fork servers (their children are killed with them), remove the scratch
        root and end the guard."""
        self._servers.close()
        self.scratch.remove()
        if self.guard is not None:
            self.guard.close()

    def _watch_server(self, server: ForkServer) -> None:
        if self.guard is not None:
            self.guard.watch(server.pid)

    def cancel(self) -> None:
        """Kill the children that run now and refuse to start more (thread-safe)."""
        self._cancelled.set()

    def child_folder(self, planned: PlannedExperiment, role: Role) -> Path:
        """The child's own folder, absolute: <experiment id>/<run id>/<role>."""
        return (self.options.output_dir / planned.experiment_id / self.sweep.run_id
                / role.value).resolve()

    def child_environment(self, planned: PlannedExperiment, role: Role, folder: Path,
                          scratch: Path, slot: Optional[Slot] = None) -> dict[str, str]:
        """The runner's environment less its own variables, plus what the stack (and, for
        timing, the observers) declare."""
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith(RUNNER_VARIABLE_PREFIX)}
        environment.update(OFFLINE_ENVIRONMENT)
        python_path = [str(PROJECT_ROOT)]
        if environment.get("PYTHONPATH"):
            python_path.append(environment["PYTHONPATH"])
        environment["PYTHONPATH"] = os.pathsep.join(python_path)
        # A fresh compile cache per child keeps cold-start latency honest.
        environment["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
        environment["TRITON_CACHE_DIR"] = str(scratch / "triton")
        if self.guard is not None:
            environment.update(self.guard.environment())
        stack = backends.get_stack(planned.experiment.stack)
        environment.update(stack.child_environment(planned.experiment))
        if slot is not None:
            environment.update(slot.environment())
        if role is Role.TIME:
            environment.update(observability_environment(stack, self.settings, folder, environment))
        return environment

    def run_child(self, planned: PlannedExperiment, role: Role,
                  slot: Optional[Slot] = None) -> ChildOutcome:
        """Start a child in its own folder (on `slot`'s cores and GPU when given), watch it,
        and collect its result and output."""
        if self._cancelled.is_set():
            raise ExperimentCancelled("the sweep was stopped")
        folder = self.child_folder(planned, role)
        folder.mkdir(parents=True, exist_ok=True)
        result_path = folder / RESULT_FILE
        result_path.unlink(missing_ok=True)
        cpu_set = slot.cpu_set if slot is not None and slot.cpu_set else self.options.child_cpu_set()
        spec = ChildSpec(planned.model, planned.experiment, self.settings, role, str(folder),
                         self.options.log_level, cpu_set)
        write_message(folder / SPEC_FILE, spec)
        scratch = self.scratch.new_folder()
        outcome = ChildOutcome(folder)
        start = time.monotonic()
        try:
            # Unbuffered: a failed write (full disk) shows in the pump, never at close.
            with open(folder / LOG_FILE, "wb", buffering=0) as log_file:
                process = self._start(
                    planned, folder, self.child_environment(planned, role, folder, scratch, slot))
                if self.guard is not None:
                    self.guard.watch(process.pid)
                pump = _Pump(process.stdout, log_file, self.options.print_subprocess)
                pumping = threading.Thread(target=pump.run, daemon=True)
                pumping.start()
                try:
                    self._watch(process, result_path, outcome, start)
                finally:
                    kill_tree(process.pid)
                    process.wait()
                    pumping.join(timeout=5)
                    if self.guard is not None:
                        self.guard.forget(process.pid)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if pump.error is not None:
            raise OSError(pump.error.errno, pump.error.strerror, str(folder / LOG_FILE))
        outcome.returncode = process.returncode
        outcome.wall_seconds = time.monotonic() - start
        outcome.output_tail = read_tail(folder / LOG_FILE)
        if result_path.exists():
            try:
                outcome.result = read_message(result_path, ChildResult)
            except ValueError as error:
                outcome.notes.append(f"the child's result could not be read: {error}")
        elif process.returncode == CHILD_OUTPUT_FAILED:
            raise OSError(errno.EIO, f"the child could not write its result ({pump.last_line()})",
                          str(result_path))
        return outcome

    def _start(self, planned: PlannedExperiment, folder: Path,
               environment: dict[str, str]) -> "subprocess.Popen | ForkedChild":
        """Start `runner.worker` for `folder`: forked from a preloaded server, or spawned."""
        if self.options.start_method == "forkserver" and not names_own_folder(
                environment, [str(folder)]):
            stack = backends.get_stack(planned.experiment.stack)
            try:
                server = self._servers.server_for(
                    stack.preload, environment, cuda=planned.experiment.accelerator == "cuda")
                return server.start("runner.worker", [str(folder)], environment, str(folder))
            except ForkServerError as error:
                if not self._fork_failure_told:
                    self._fork_failure_told = True
                    log.warning("%s; such children start as fresh interpreters instead", error)
        return subprocess.Popen(
            [sys.executable, "-m", "runner.worker", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=str(folder),
            start_new_session=True,
        )

    def _watch(
        self, process: "subprocess.Popen | ForkedChild", result_path: Path, outcome: ChildOutcome, start: float
    ) -> None:
        result_seen_at: Optional[float] = None
        while process.poll() is None:
            if self._cancelled.is_set():
                raise ExperimentCancelled("the sweep was stopped")
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
            try:  # wakes as soon as the child exits
                process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass

    def run(self, planned: PlannedExperiment, slot: Optional[Slot] = None) -> ResultLine:
        """Run one experiment (on `slot` when given) and return its results line (never
        raises for the child; raises ExperimentCancelled when the sweep is stopped).

        Timing and verification run in separate children: verification needs eager
        references in a process that no other stack has touched.
        """
        if self.settings.verify_only:
            outcome = self.run_child(planned, Role.VERIFY, slot)
            self._log_child_notes(outcome)
            line = self.line_from_outcome(planned, outcome)
            line.artifacts = {Role.VERIFY.value: self._relative(outcome.folder)}
            return line
        outcome = self.run_child(planned, Role.TIME, slot)
        self._log_child_notes(outcome)
        line = self.line_from_outcome(planned, outcome)
        line.artifacts = {Role.TIME.value: self._relative(outcome.folder)}
        if self.settings.verify:
            verification = self.run_child(planned, Role.VERIFY, slot)
            line.apply_verdict(verdict_of(verification))
            line.artifacts[Role.VERIFY.value] = self._relative(verification.folder)
        return line

    def _relative(self, folder: Path) -> str:
        try:
            return str(folder.relative_to(self.options.output_dir.resolve()))
        except ValueError:
            return str(folder)

    def _log_child_notes(self, outcome: ChildOutcome) -> None:
        """Warn about each distinct note of the children once per sweep."""
        for note in outcome.result.notes if outcome.result else ():
            if note not in self._notes_logged:
                self._notes_logged.add(note)
                log.warning("%s", note)

    def new_line(self, planned: PlannedExperiment, **fields) -> ResultLine:
        """A line for `planned` with this sweep's identity and timestamp."""
        if fields.get("accelerator_model") is None:
            fields["accelerator_model"] = self.sweep.accelerator_models.get(
                planned.experiment.accelerator)
        return ResultLine(
            model=planned.model, experiment=planned.experiment, settings=self.settings,
            stack_label=planned.label, experiment_id=planned.experiment_id,
            run_id=self.sweep.run_id, command=self.sweep.command,
            timestamp=self.sweep.timestamp, **fields)

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> ResultLine:
        """The line of an experiment its suite says cannot run."""
        return self.new_line(planned, status=Status.SKIPPED,
                             verification_code=VerificationCode.VERIFIER_SKIPPED,
                             skip_reason=reason)

    def line_from_outcome(self, planned: PlannedExperiment, outcome: ChildOutcome) -> ResultLine:
        """The results line for a child's outcome, success or any kind of failure."""
        result = outcome.result or ChildResult()
        metrics, summary = dict(result.metrics), dict(result.summary)
        peak = max(outcome.peak_tree_rss_bytes, int(summary.get("child_max_rss_bytes", 0)))
        if peak:
            summary["peak_host_memory_bytes"] = peak
        summary["wall_time"] = outcome.wall_seconds
        common = dict(environment=result.environment, batch_size_used=result.batch_size_used,
                      accelerator_model=result.accelerator_model, summary=summary)
        if outcome.result is not None and result.status is Status.SKIPPED:
            return self.new_line(planned, status=Status.SKIPPED, metrics=metrics,
                                 verification_code=VerificationCode.VERIFIER_SKIPPED,
                                 skip_reason=result.skip_reason, **common)
        succeeded = (outcome.result is not None and result.status is Status.OK
                     and not outcome.timed_out and not outcome.memory_exceeded)
        if not succeeded:
            metrics["error"] = failure_text(outcome)
        line = self.new_line(
            planned, status=Status.OK if succeeded else Status.FAILED, metrics=metrics,
            verification_code=(VerificationCode.VERIFIER_SKIPPED if succeeded
                               else VerificationCode.VERIFIER_DIDNT_RUN),
            notes=list(result.notes) + (outcome.notes if succeeded else []), **common)
        if result.verdict is not None:
            line.apply_verdict(result.verdict)
        return line


def verdict_of(verification: ChildOutcome) -> Verdict:
    """The verification child's verdict, or VERIFIER_DIDNT_RUN with what happened."""
    if verification.result is not None and verification.result.verdict is not None:
        return verification.result.verdict
    return Verdict.didnt_run(failure_text(verification))


def failure_text(outcome: ChildOutcome) -> str:
    """A bounded, readable account: what happened, the exception, the output's tail."""
    result = outcome.result
    parts = list(outcome.notes)
    if result is not None and result.status is Status.FAILED and result.error is not None:
        parts.append(f"the experiment raised {result.error.exception}")
        if result.error.traceback:
            parts.append("traceback:\n" + bounded(result.error.traceback, 1500))
    elif not outcome.timed_out and not outcome.memory_exceeded:
        parts.append(describe_exit(outcome.returncode))
    if outcome.output_tail:
        parts.append("last output of the child:\n" + outcome.output_tail)
    return bounded("\n".join(parts))
