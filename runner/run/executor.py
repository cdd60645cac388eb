"""Run one experiment in isolated children and turn whatever happened into a results line.

The executor composes the parts: the child's folder and environment (runner/run/process/child_env.py),
its supervision (runner/run/process/supervision.py: timeouts, memory limit, whole-tree kills, the
output pump) and the line made of its outcome (runner/run/record/lines.py). Each child gets a fresh
interpreter, or a fork of a preloaded server (runner/run/process/forkserver_client.py); compile
caches go to a fresh folder under the runner's scratch root (runner/run/process/scratch.py).

A write the parent cannot make (the child's folder, spec or log: a full disk, a file-size
limit, an unusable output folder) raises OSError naming the file; the sweep stops there:
nothing can be recorded on a full disk.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

import backends
import models
from core.config import RunSettings
from core.contract import RESULT_FILE, SPEC_FILE, ChildError, ChildResult, ChildSpec, Role, write_message
from core.fields import processes_for
from core.figures import median_time
from core.host.host_bound import judge_host_share
from core.schema import ResultLine, Status, Verdict
from core.phases import DIGITS
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import MIN_CPUS_PER_SHARED_SLOT, Slot, split_cores, visible_gpus
from runner.run.process.child_env import (child_cores, child_environment, child_folder,
                                          gate_path, make_own_folder)
from runner.run.process.forkserver_client import ForkedChild, ForkServer, ForkServerError, ForkServers, names_own_folder
from runner.run.process.guard import ProcessGuard
from runner.run.record.lines import (SweepInfo, failure_text, line_from_outcome, new_line, outcome_succeeded,
                              skipped_line, verdict_of)
from runner.run.process.oom import gpu_memory_ran_out
from runner.run.process.processes import combine
from runner.run.process.scratch import ScratchRoot
from runner.run.record.slow_periods import ReferenceHistory
from runner.run.process.supervision import ChildOutcome, ExperimentCancelled, Supervisor, spawn_worker

log = logging.getLogger(__name__)


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
    #: that preloaded the stack's libraries (runner/run/process/forkserver_client.py).
    start_method: str = "spawn"
    #: With forkserver: the folder of the server pool the servers are forked from
    #: (runner/run/process/forkserver_pool.py), None for servers of the runner's own.
    server_pool: Optional[Path] = None
    #: Variables every child gets from the host's probe (HostCapabilities.child_environment).
    host_variables: tuple[tuple[str, str], ...] = ()
    #: The preloads the sweep's experiments ask for (Stack.preload_for; Stack.preload_in: which
    #: server a child starts from).
    sweep_preloads: frozenset[tuple[str, ...]] = frozenset()


class SlotLender(Protocol):
    """Where an experiment borrows idle slots of its GPU for its later timing processes
    (runner/run/dispatch/local.py: `SlotPool`)."""

    def borrow(self, like: Slot, wanted: Callable[[], bool]) -> Optional[Slot]: ...

    def put(self, slot: Slot) -> None: ...

    def wake(self) -> None: ...


def server_preload(planned: PlannedExperiment,
                   sweep_preloads: frozenset[tuple[str, ...]]) -> tuple[str, ...]:
    """What the fork server of `planned`'s child imports: its stack's preload in this sweep
    (Stack.preload_in), then its suite's libraries (Suite.preload)."""
    stack = backends.get_stack(planned.experiment.stack)
    return tuple(dict.fromkeys((*stack.preload_in(sweep_preloads),
                                *models.suite_preload(planned.model.suite_name))))


class ExperimentExecutor:
    """Runs planned experiments one at a time, each in children of its own."""

    def __init__(self, options: ExecutorOptions, settings: RunSettings, sweep: SweepInfo,
                 guard: Optional[ProcessGuard] = None,
                 scratch: Optional[ScratchRoot] = None) -> None:
        self.options = options
        self.references = ReferenceHistory()
        self.settings = settings
        self.sweep = sweep
        self.guard = guard
        self.scratch = scratch or ScratchRoot()
        self._notes_logged: set[str] = set()
        self._cancelled = threading.Event()
        self._supervisor = Supervisor(options.timeout_seconds, options.memory_limit_bytes,
                                      options.print_subprocess, guard, self._cancelled)
        self._servers = ForkServers(on_start=self._watch_server, on_end=self._forget_server,
                                    pool=options.server_pool)
        self._fork_failure_told = False
        self._gates: dict[str, str] = {}

    def start(self) -> None:
        """Start the guard and make the scratch root it removes however the runner ends."""
        if self.guard is not None:
            self.guard.start()
            self.guard.remove_on_exit(self.scratch.create())

    def close(self) -> None:
        """Stop the fork servers (their children are killed with them), remove the scratch
        root and end the guard."""
        self._supervisor.wait_for_exits()
        self._servers.close()
        self.scratch.remove()
        if self.guard is not None:
            self.guard.close()

    def prestart_servers(self, experiments: Sequence[PlannedExperiment]) -> None:
        """With fork servers, start every server the timing children of `experiments` fork
        from, all at once, before the first child: a sweep of eager and PJRT experiments
        imports torch and torch_xla in two servers side by side on two cores rather than one
        after the other (about 2 s less on the 2-core machine; no child runs meanwhile, so no
        timing shares its cores with an import)."""
        if self.options.start_method != "forkserver":
            return
        self._servers.prestart(self._wanted_servers(experiments))

    def warm_templates(self, experiments: Sequence[PlannedExperiment]) -> int:
        """With a server pool, start the pool's templates that the timing children of
        `experiments` would fork from, where none runs, without waiting for their imports:
        a runner does so while it waits for something else (the host's probe), and its
        servers come from them later (`prestart_servers`). The number started."""
        if self.options.start_method != "forkserver":
            return 0
        return self._servers.warm(self._wanted_servers(experiments))

    def _wanted_servers(self, experiments: Sequence[PlannedExperiment],
                        ) -> list[tuple[tuple[str, ...], dict[str, str]]]:
        """The (modules, environment) of the server each timing child of `experiments`
        forks from (none for a child that names its own folder at import)."""
        wanted = []
        placeholder = Path(self.scratch.path or ".") / "unused"  # per-child: not in the key
        for planned in experiments:
            folder = self.child_folder(planned, Role.TIME)
            environment = self.child_environment(planned, Role.TIME, folder, placeholder)
            if not names_own_folder(environment, [str(folder)]):
                wanted.append((server_preload(planned, self.options.sweep_preloads), environment))
        return wanted

    def _watch_server(self, server: ForkServer) -> None:
        if self.guard is not None:
            self.guard.watch(server.pid)

    def _forget_server(self, pid: int) -> None:
        """A server that ended is no longer the guard's: with pids of at most 32768 (a
        common pid_max), its number may soon be another process group's, which the guard
        would kill at the runner's end."""
        if self.guard is not None:
            self.guard.forget(pid)

    def cancel(self) -> None:
        """Kill the children that run now and refuse to start more (thread-safe)."""
        self._cancelled.set()

    def child_folder(self, planned: PlannedExperiment, role: Role, process: int = 1,
                     attempt: int = 1) -> Path:
        """The child's own folder, absolute: <experiment id>/<run id>/<role>, and
        <role>-<process> for the timing processes after the first; a later attempt at the
        same experiment in this run (--remeasure-slow) adds -attempt<n>, so that each
        attempt's line points to its own children's files."""
        folder = child_folder(self.options.output_dir, self.sweep.run_id, planned, role)
        name = artifact_key(role, process) + (f"-attempt{attempt}" if attempt > 1 else "")
        return folder.with_name(name)

    def next_attempt(self, planned: PlannedExperiment, role: Role) -> int:
        """The first attempt at `planned` in this run whose folder does not exist yet."""
        attempt = 1
        while self.child_folder(planned, role, 1, attempt).exists():
            attempt += 1
        return attempt

    def child_environment(self, planned: PlannedExperiment, role: Role, folder: Path,
                          scratch: Path, slot: Optional[Slot] = None) -> dict[str, str]:
        """The runner's environment less its own variables, plus what the stack (and, for
        timing, the observers) declare."""
        return child_environment(planned, role, folder, scratch, self.settings, self.guard, slot,
                                 dict(self.options.host_variables))

    def run_child(self, planned: PlannedExperiment, role: Role,
                  slot: Optional[Slot] = None, process: int = 1,
                  scratch: Optional[Path] = None, attempt: int = 1,
                  threads: Optional[int] = None) -> ChildOutcome:
        """Start a child in its own folder (on `slot`'s cores and GPU when given), watch it,
        and collect its result and output. With `scratch`, the child's compile caches go
        there and stay for the next process; otherwise to a fresh folder removed after it."""
        if self._cancelled.is_set():
            raise ExperimentCancelled("the sweep was stopped")
        folder = self.child_folder(planned, role, process, attempt)
        moved = make_own_folder(self.options.output_dir, folder)
        (folder / RESULT_FILE).unlink(missing_ok=True)
        shared = scratch is not None
        settings = self.settings if threads is None else dataclasses.replace(
            self.settings, threads=threads)
        spec = ChildSpec(planned.model, planned.experiment, settings, role, str(folder),
                         self.options.log_level, child_cores(slot, self.options.cpu_set),
                         warm_caches=shared and process > 1,
                         device_gate=self.device_gate(planned, slot),
                         host_temp_dir=tempfile.gettempdir())
        write_message(folder / SPEC_FILE, spec)
        scratch = scratch if scratch is not None else self.scratch.new_folder()
        asked_at = time.time()
        outcome = self._supervisor.run(folder, scratch, lambda: self._start(
            planned, folder, self.child_environment(planned, role, folder, scratch, slot)),
            keep_scratch=shared, done_at_output_end=planned.experiment.accelerator == "cpu")
        _add_parent_phases(outcome, asked_at)
        outcome.notes[:0] = moved
        return outcome

    def device_gate(self, planned: PlannedExperiment, slot: Optional[Slot]) -> Optional[str]:
        """The lock file through which a CUDA experiment's children take turns on their GPU
        with every other child on it, of this runner's slots (--experiments-per-gpu) or of
        another runner of this user on this host; None for the other accelerators."""
        if planned.experiment.accelerator != "cuda":
            return None
        if slot is not None and slot.cuda_device is not None:
            device = slot.cuda_device
        else:
            device = (visible_gpus(0) or ["0"])[0]
        if device not in self._gates:  # its folder made once, not per child
            self._gates[device] = str(gate_path(device))
        return self._gates[device]

    def time_processes(self, planned: PlannedExperiment, count: int,
                       slot: Optional[Slot] = None, attempt: int = 1,
                       lender: Optional[SlotLender] = None,
                       ) -> tuple[ChildOutcome, list[ChildOutcome]]:
        """Run the timing child `count` times, each process with its own warm-up and timed
        runs; later ones reuse the first one's compile caches (a folder shared by them,
        removed at the end), or with `process_caches` "fresh" each gets empty ones of its
        own. The later processes run one after the other on `slot`, and, with a `lender`,
        also on the slots of its GPU that it lends meanwhile (`_run_later`). The
        experiment's outcome (its result made of every process's:
        runner/run/process/processes.py) and each process's outcome, in order.

        When the first process fails, no other runs: its outcome is the experiment's."""
        if count == 1:
            outcome = self.run_child(planned, Role.TIME, slot, attempt=attempt)
            return outcome, [outcome]
        fresh = planned.experiment.process_caches == "fresh"
        caches = None if fresh else self.scratch.new_folder()
        shares = self.later_shares(planned, count, slot)
        try:
            first = self.run_child(planned, Role.TIME, slot, 1, caches, attempt)
            if not outcome_succeeded(first):
                return first, [first]
            if shares:
                later = self._run_later_at_once(planned, shares, slot, caches, attempt)
            else:
                later = self._run_later(planned, range(2, count + 1), slot, caches, attempt,
                                        lender)
        finally:
            if caches is not None:
                shutil.rmtree(caches, ignore_errors=True)
        places = [slot] + [later[process][0] for process in range(2, count + 1)]
        outcomes = [first] + [later[process][1] for process in range(2, count + 1)]
        results = [outcome.result if outcome_succeeded(outcome) else _failed_result(outcome)
                   for outcome in outcomes]
        result = combine(results, count)
        if isinstance(result.summary.get("processes"), dict):
            # What each process cost, start to exit, and its exit alone (the parent's view);
            # the slot each ran on where the sweep has slots.
            result.summary["processes"].update(
                wall_seconds=[round(o.wall_seconds, 3) for o in outcomes],
                exit_seconds=[None if o.exit_seconds is None else round(o.exit_seconds, 3)
                              for o in outcomes])
            if slot is not None:
                result.summary["processes"]["slots"] = [place.index for place in places]
            if shares:
                result.summary["processes"]["later_at_once"] = [
                    list(place.cpu_set) if place is not None and place.cpu_set else None
                    for place in places]
        combined = dataclasses.replace(
            first, result=result,
            peak_tree_rss_bytes=max(o.peak_tree_rss_bytes for o in outcomes),
            wall_seconds=sum(o.wall_seconds for o in outcomes))
        return combined, outcomes

    def later_shares(self, planned: PlannedExperiment, count: int,
                     slot: Optional[Slot]) -> list[Slot]:
        """Where a CUDA experiment has all of the runner's cores (one job at a time), the
        places of its later timing processes when they run at once: a disjoint share of the
        cores each (whole physical cores), on the same GPU, taking turns on the card through
        its gate (child/device_gate.py), so that one compiles from the first process's caches
        while another times. [] where they run one after the other: fewer than two later
        processes, not CUDA, a stack that keeps a GPU to itself, fresh caches per process
        (each compiles in full: on a share of the cores that costs more than it saves), a
        slot with cores of its own, or shares under MIN_CPUS_PER_SHARED_SLOT CPUs."""
        experiment = planned.experiment
        if (count < 3 or experiment.accelerator != "cuda" or experiment.process_caches == "fresh"
                or (slot is not None and slot.cpu_set)
                or not backends.get_stack(experiment.stack).shares_a_gpu):
            return []
        cores = child_cores(None, self.options.cpu_set)
        if len(cores) // (count - 1) < MIN_CPUS_PER_SHARED_SLOT:
            return []
        device = slot.cuda_device if slot is not None else None
        return [Slot(slot.index if slot is not None else 0, share, device, shares_device=True)
                for share in split_cores(cores, count - 1)]

    def _run_later_at_once(self, planned: PlannedExperiment, shares: Sequence[Slot],
                           slot: Optional[Slot], caches: Optional[Path], attempt: int,
                           ) -> dict[int, tuple[Optional[Slot], ChildOutcome]]:
        """Run the later timing processes at once, process k on `shares[k - 2]`, each with
        the first process's thread count (the same settings at every timed call). A process
        that ran out of the GPU's memory beside the others runs again alone on `slot`. Each
        process's place and outcome; raises what a start raised once the others have ended."""
        threads = self.settings.threads or len(child_cores(slot, self.options.cpu_set))
        outcomes: dict[int, tuple[Optional[Slot], ChildOutcome]] = {}
        failures: list[BaseException] = []

        def work(process: int, place: Slot) -> None:
            try:
                outcomes[process] = place, self.run_child(planned, Role.TIME, place, process,
                                                          caches, attempt, threads=threads)
            except BaseException as error:
                failures.append(error)

        workers = [threading.Thread(target=work, args=(process, place), daemon=True,
                                    name=f"later-{planned.experiment_id}-{process}")
                   for process, place in enumerate(shares, 2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if failures:
            raise failures[0]
        for process, (_, outcome) in sorted(outcomes.items()):
            if outcome_succeeded(outcome) or not gpu_memory_ran_out(failure_text(outcome)):
                continue
            log.warning("%s: timing process %d ran out of GPU memory beside the other later "
                        "ones; it runs again alone", planned.experiment_id, process)
            alone = self.run_child(planned, Role.TIME, slot, process, caches, attempt + 1)
            alone.notes.append(f"timing process {process} ran out of GPU memory beside the "
                               "other later processes and ran again alone")
            outcomes[process] = slot, alone
        return outcomes

    def _run_later(self, planned: PlannedExperiment, processes: range, slot: Optional[Slot],
                   caches: Optional[Path], attempt: int, lender: Optional[SlotLender],
                   ) -> dict[int, tuple[Optional[Slot], ChildOutcome]]:
        """Run the later timing processes: on `slot`, one after the other, and on each
        slot `lender` lends meanwhile (a thread per process beyond the next one waits for
        a loan while a process is left). Each process's slot and outcome. Raises what a
        process's start raised (the sweep stopped) once the others have ended."""
        left = deque(processes)
        lock = threading.Lock()
        failures: list[BaseException] = []
        outcomes: dict[int, tuple[Optional[Slot], ChildOutcome]] = {}

        def next_process() -> Optional[int]:
            with lock:
                process = left.popleft() if left and not failures else None
            if lender is not None and not left:
                lender.wake()  # the borrowers waiting for a slot give up
            return process

        def work(on: Optional[Slot]) -> None:
            try:
                while (process := next_process()) is not None:
                    outcomes[process] = on, self.run_child(planned, Role.TIME, on, process,
                                                           caches, attempt)
            except BaseException as error:
                with lock:
                    failures.append(error)
                if lender is not None:
                    lender.wake()

        def borrow_and_work() -> None:
            assert lender is not None and slot is not None
            borrowed = lender.borrow(slot, lambda: bool(left) and not failures)
            if borrowed is None:
                return
            log.debug("%s: slot %d runs a later timing process of slot %d's experiment",
                      planned.experiment_id, borrowed.index, slot.index)
            try:
                work(borrowed)
            finally:
                lender.put(borrowed)

        lends = lender is not None and slot is not None
        borrowers = [threading.Thread(target=borrow_and_work, daemon=True,
                                      name=f"borrow-{planned.experiment_id}")
                     for _ in range(len(left) - 1)] if lends else []
        for borrower in borrowers:
            borrower.start()
        work(slot)
        for borrower in borrowers:
            borrower.join()
        if failures:
            raise failures[0]
        return outcomes

    def _start(self, planned: PlannedExperiment, folder: Path,
               environment: dict[str, str]) -> "subprocess.Popen | ForkedChild":
        """Start `child.worker` for `folder`: forked from a preloaded server, or spawned."""
        if self.options.start_method == "forkserver" and not names_own_folder(
                environment, [str(folder)]):
            try:
                server = self._servers.server_for(
                    server_preload(planned, self.options.sweep_preloads), environment,
                    cuda=planned.experiment.accelerator == "cuda")
                return server.start("child.worker", [str(folder)], environment, str(folder))
            except ForkServerError as error:
                if not self._fork_failure_told:
                    self._fork_failure_told = True
                    log.warning("%s; such children start as fresh interpreters instead", error)
        return spawn_worker(folder, environment)

    def run(self, planned: PlannedExperiment, slot: Optional[Slot] = None,
            lender: Optional[SlotLender] = None) -> ResultLine:
        """Run one experiment (on `slot` when given, its later timing processes also on the
        slots `lender` lends) and return its results line (never raises for the child;
        raises ExperimentCancelled when the sweep is stopped).

        Timing and verification run in separate children: verification needs eager
        references in a process that no other stack has touched.
        """
        if self.settings.verify_only:
            outcome = self.run_child(planned, Role.VERIFY, slot,
                                     attempt=self.next_attempt(planned, Role.VERIFY))
            self._log_child_notes(outcome)
            line = self.line_from_outcome(planned, outcome)
            line.artifacts = {Role.VERIFY.value: self._relative(outcome.folder)}
            return line
        count = processes_for(planned.experiment.accelerator, planned.experiment.processes)
        planned = dataclasses.replace(
            planned, experiment=dataclasses.replace(planned.experiment, processes=count))
        attempt = self.next_attempt(planned, Role.TIME)
        outcome, outcomes = self.time_processes(planned, count, slot, attempt, lender)
        self._log_child_notes(outcome)
        line = self.line_from_outcome(planned, outcome)
        line.artifacts = {artifact_key(Role.TIME, process): self._relative(each.folder)
                          for process, each in enumerate(outcomes, 1)}
        if line.status is Status.OK:
            judge_host_share(line.summary, median_time({"summary": line.summary,
                                                        "metrics": line.metrics}))
            line.notes.extend(self._judge(line))
        if self.settings.verify:
            # The timing is measured: whatever stops the verification (the sweep stopped, its
            # folder not writable) leaves a line without a verdict, never no line.
            try:
                verification = self.run_child(planned, Role.VERIFY, slot, attempt=attempt)
            except (ExperimentCancelled, OSError) as error:
                line.apply_verdict(Verdict.didnt_run(f"the verification did not start: {error}"))
                return line
            line.apply_verdict(verdict_of(verification))
            if verification.result is not None and "phases" in verification.result.summary:
                line.summary["verify_phases"] = verification.result.summary["phases"]
            line.artifacts[Role.VERIFY.value] = self._relative(verification.folder)
        return line

    def _judge(self, line: ResultLine) -> list[str]:
        """Judge the line against the reference workload's history (slow periods); the
        history's trouble is a warning in the line, never the line's loss."""
        try:
            return self.references.judge_summary(line.summary, line.accelerator_model,
                                                 line.metrics)
        except Exception as error:  # a side file's trouble must not cost a measured line
            log.warning("the line was not judged for slow periods: %s: %s",
                        type(error).__name__, error)
            return [f"not judged for slow periods: {type(error).__name__}: {error}"[:500]]

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
        return new_line(self.settings, self.sweep, planned, **fields)

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> ResultLine:
        """The line of an experiment its suite says cannot run."""
        return skipped_line(self.settings, self.sweep, planned, reason)

    def line_from_outcome(self, planned: PlannedExperiment, outcome: ChildOutcome) -> ResultLine:
        """The results line for a child's outcome, success or any kind of failure."""
        return line_from_outcome(self.settings, self.sweep, planned, outcome)


def artifact_key(role: Role, process: int = 1) -> str:
    """The key of a child's folder in its line's `artifacts`: the role, and -<process> for
    the timing processes after the first."""
    return role.value if process == 1 else f"{role.value}-{process}"


def _add_parent_phases(outcome: ChildOutcome, asked_at: float) -> None:
    """The parent's view of the child's steps (child/phases.py), added to them: how
    long it took to start (from the runner's request to the child's `main`), to exit once its
    result was written, and in all."""
    phases = outcome.result.summary.get("phases") if outcome.result is not None else None
    if not isinstance(phases, dict) or not isinstance(phases.get("started_at"), (int, float)):
        return
    phases["start_s"] = round(phases["started_at"] - asked_at, DIGITS)
    phases["exit_s"] = None if outcome.exit_seconds is None else round(outcome.exit_seconds, DIGITS)
    phases["wall_s"] = round(outcome.wall_seconds, DIGITS)


def _failed_result(outcome: ChildOutcome) -> ChildResult:
    """A process that did not end OK, as a result naming what happened."""
    if outcome.result is not None and outcome.result.status is not Status.OK:
        return outcome.result
    return ChildResult(status=Status.FAILED, error=ChildError(failure_text(outcome)))
