"""The child process: load one model, prepare it on its stack, time or verify it.

Run as `python -m child.worker FOLDER`. FOLDER is the child's own folder: the parent wrote
`spec.json` (a `ChildSpec`) there, and the child writes `result.json` (a `ChildResult`)
there, atomically; its dumps go there too. The parent alone turns the result into a line.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import platform
import resource
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Optional

from core.contract import (
    GATE_WAITS_FILE,
    RESULT_FILE,
    SPEC_FILE,
    ChildError,
    ChildResult,
    ChildSpec,
    Role,
    read_message,
    write_message,
)
from backends.runtimes.inductor_host import ISA_CHECKS_VARIABLE, settle_isa_checks
from core.schema import Status, Verdict
from child.gpu_state import GpuWatch
from child.host_failures import host_cause
from child.reference import CorePicker, host_pulse, pulse_reading, tries_for
from core.lifetime import die_with_parent
from core.packages import installed_packages
from core.phases import Phases
from observers.base import RunHooks

if TYPE_CHECKING:
    from child.device_gate import DeviceGate

log = logging.getLogger("child.worker")

#: Exit status when the result cannot be written (runner.run.executor.CHILD_OUTPUT_FAILED).
EXIT_OUTPUT_FAILED = 74

#: Variables recorded with every line, so a reader can trust and reproduce it.
RECORDED_VARIABLES = ("PJRT_DEVICE", "XLA_FLAGS", "JAX_PLATFORMS", "XLA_DISABLE_FUNCTIONALIZATION",
                      "CUDA_VISIBLE_DEVICES")


class ModelCannotRun(Exception):
    """The model does not support this configuration: a skip, not a failure."""


def environment_record() -> dict[str, Any]:
    """What a reader needs to trust and reproduce a line."""
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


def run_child(spec: ChildSpec, result: ChildResult, phases: Optional[Phases] = None) -> None:
    """Load and prepare, then time or verify as the spec's role says, filling `result`
    (and `phases` with the seconds of each step)."""
    phases = phases or Phases()
    import torch
    # Loaded in every child before it counts its workload and reads its settings: the count
    # runs torch's decompositions, which import dynamo at their first call, and a child
    # whose count was cached timed (and recorded its settings) without it. A forked child
    # has it from its server (backends/base.py TORCH_PRELOAD).
    import torch._dynamo  # noqa: F401

    import backends
    from backends.runtimes.precision import apply_numerics
    from models import get_suite

    model, experiment = spec.model, spec.experiment
    torch.set_num_threads(thread_count(spec))
    torch.manual_seed(experiment.seed)
    apply_numerics(experiment)
    suite = get_suite(model.suite_name, reduced=model.reduced, torchbench_dir=model.torchbench_dir)
    stack = backends.get_stack(experiment.stack)
    phases.mark("setup_s")
    gate = device_gate(spec)
    if gate is not None:
        phases.mark("gate_s")
    try:
        # Before any backward of this process (counting a training iteration's FLOPs runs
        # one): the autograd engine sizes its device queues at the first, so XLA's device
        # must exist.
        stack.initialize_process(experiment)
        _run_on_device(spec, suite, stack, result, phases, gate)
    finally:
        if gate is not None:
            # Lending stops; the gate itself goes with the process (its exit frees the
            # card's memory as the kernel drops the lock), so the next child finds it free.
            gate.stop_lending()
            result.summary["device_gate"] = gate.record()


def device_gate(spec: ChildSpec) -> Optional["DeviceGate"]:
    """The turn on the child's GPU (shared with every other CUDA child of this user's runners
    on this host), taken before the card is first touched; None for the other
    accelerators."""
    if spec.device_gate is None:
        return None
    from child.device_gate import DeviceGate

    gate = DeviceGate(spec.device_gate, waits_file=str(Path(spec.folder) / GATE_WAITS_FILE))
    gate.acquire()
    return gate


def _run_on_device(spec: ChildSpec, suite, stack, result: ChildResult, phases: Phases,
                   gate: Optional["DeviceGate"]) -> None:
    model, experiment = spec.model, spec.experiment
    try:
        with build_device(stack, experiment, spec.role):
            bench = suite.load(model.model_name, experiment.test, experiment.batch_size,
                               seed=experiment.seed)
    except NotImplementedError as error:
        raise ModelCannotRun(f"{model.model_name} does not implement {experiment.test}: "
                             f"{error}") from error
    result.batch_size_used = bench.batch_size
    phases.mark("build_s")
    if spec.role is Role.TIME or spec.settings.verify_only:  # the children whose line it is
        result.workload = workload_of(suite, spec, bench.batch_size)
        phases.mark("workload_s")
    result.environment["torch_settings"] = torch_settings(device_type=experiment.accelerator)
    if spec.role is Role.VERIFY:
        # Verification runs in a child of its own (see executor), never after timing: a
        # stack like torchax changes the process so that eager references would break.
        result.verdict = verification_verdict(spec, suite, stack, bench.nondeterministic_reason)
        phases.mark("verify_s")
        return
    time_experiment(spec, stack, bench, result, phases, gate)


def build_device(stack, experiment, role: Role = Role.TIME) -> ContextManager[Any]:
    """Where the model is built: a timing child on CUDA of a stack that runs the model on
    the torch CUDA device builds it there (its random weights drawn there, seeded as on the
    CPU: the values differ from a CPU build's, the shapes, dtypes and work do not); every
    other child on torch's default, the CPU. PyTorch's harness builds on the CPU and moves
    the model; each of our timing processes builds it again, which on the CPU takes a
    minute for a model of a few billion parameters. Verification builds its own models on
    the CPU (child/verification.py), so its child keeps this one off the device."""
    import torch

    if (role is Role.TIME and experiment.accelerator == "cuda"
            and stack.capabilities.builds_on_device):
        return torch.device("cuda")
    return contextlib.nullcontext()


def workload_of(suite, spec: ChildSpec, batch_size: int) -> dict[str, Any]:
    """The experiment's workload signature (cached); a signature that cannot be made is
    recorded with its error and never fails the experiment."""
    from child.workload import experiment_workload

    try:
        return experiment_workload(suite, spec.model, spec.experiment, batch_size)
    except Exception as error:
        log.warning("no workload signature: %s: %s", type(error).__name__, error)
        return {"error": f"{type(error).__name__}: {error}"[:500],
                "flops_per_iteration": None,
                "flops_error": "the signature could not be made"}


def thread_count(spec: ChildSpec) -> int:
    """--threads, else one thread per core of the child's CPU set."""
    return spec.settings.threads or len(spec.cpu_set) or len(os.sched_getaffinity(0))


def pairs_with_eager(spec: ChildSpec, stack) -> bool:
    """Paired timing: asked for, and the stack can share a process with eager (and is not
    eager itself)."""
    reference = stack.reference_experiment(spec.experiment)
    return (spec.settings.paired and stack.capabilities.shares_process_with_eager
            and reference.stack != stack.name)


def time_experiment(spec: ChildSpec, stack, bench, result: ChildResult,
                    phases: Optional[Phases] = None,
                    gate: Optional["DeviceGate"] = None) -> None:
    phases = phases or Phases()
    import backends
    from observers.session import ExperimentObservers
    from child.host_state import HostStateWatch
    from child.timing import HOST_CLOCK, measure
    from child.trust import CpuWatch, cpu_time_summary, judge

    observers = ExperimentObservers(stack, spec.experiment, spec.settings, Path(spec.folder))
    result.notes = observers.notes
    for note in observers.notes:
        log.warning("%s", note)
    log.info("preparing %s on %s", spec.model.model_name, stack.name)
    reference = None
    if pairs_with_eager(spec, stack):
        eager = stack.reference_experiment(spec.experiment)
        reference = backends.get_stack(eager.stack).prepare(bench, eager, spec.settings)
    prepared = stack.prepare(bench, spec.experiment, spec.settings)
    if gate is not None and stack.compiles_off_the_card(spec.experiment, prepared):
        gate.lend_during_compiles()
    observers.attach(prepared)
    watch = CpuWatch(thread_count(spec), spec.cpu_set or None)
    card = card_watch(spec)
    picker = core_picker(spec)
    host = HostStateWatch(card)
    phases.mark("prepare_s")
    before = reference_reading(spec, tries=1)
    phases.mark("reference_s")
    hooks = SettingsAtTimedCall(
        observers, lambda: torch_settings(prepared, spec.experiment.accelerator),
        gate.stop_lending if gate is not None else None)
    timing = measure(prepared, bench, spec.settings, hooks, reference=reference, watch=watch,
                     seed=spec.experiment.seed, device_watch=card,
                     pulse=host_pulse if spec.settings.reference_workload else None,
                     core_picker=picker,
                     warmup_clock=gate.working_clock if gate is not None else time.perf_counter,
                     host_watch=host, device_busy=busy_probe(spec, prepared))
    phases.mark("measure_s")
    # What the reading guards: the timed runs (the stack's and eager's), not the warm-up
    # with its compiling nor the contention check's idle probe.
    guarded = sum(timing.total_time) + sum(timing.reference_total_time)
    after = reference_reading(spec, tries=tries_for(guarded, (before or {}).get("try_s")),
                              warm=before is None)
    phases.mark("reference_s")
    during = pulse_reading(timing.host_pulses, before or after, spec.experiment.accelerator)
    if picker is not None:
        during = {**(during or {"device": spec.experiment.accelerator}),
                  "core": picker.record()}
    if before is not None or after is not None or during is not None:
        result.summary["reference"] = {"before": before, "after": after, "during": during}
    if spec.settings.pure_wall_time and timing.clock == HOST_CLOCK:
        note = (f"--pure-wall-time does not apply to the {stack.name} stack on "
                f"{spec.experiment.accelerator}: its work does not run on CUDA streams that "
                "events could time; the host clock timed it")
        log.warning("%s", note)
        result.notes.append(note)
    result.metrics.update(timing.metrics())
    result.summary.update(timing.summary())
    if timing.device_busy is None:
        from child.device_busy import not_measured, reason_not_measured

        reason = reason_not_measured(spec.experiment.accelerator,
                                     prepared.device_timer() is not None) \
            or "--no-device-busy"
        result.summary.update(device_busy=not_measured(reason), device_busy_ms=None)
    result.summary.update(prepared.final_metrics())
    per_run, whole = observers.metrics(), observers.summary()
    result.metrics.update(per_run)
    result.summary.update(whole)
    verdict = judge(timing.per_iter_time, watch.window)
    result.summary["cpu"] = watch.window.to_dict() if watch.window else None
    if card is not None:
        result.summary["gpu"] = card.window.to_dict() if card.window else None
    result.summary.update(timing_variation=verdict.variation, unreliable=verdict.unreliable,
                          unreliable_reasons=verdict.reasons, contended=verdict.contended)
    result.summary.update(cpu_time_summary(timing.thread_cpu_time, timing.process_cpu_time,
                                           spec.experiment.accelerator, thread_count(spec),
                                           timing.host_pulse_cpu))
    for reason in verdict.reasons:
        log.warning("unreliable timings: %s", reason)
    result.accelerator_model = prepared.accelerator_model()
    # As the first timed run started (else, with no timed run, as the stack left them).
    result.environment["torch_settings"] = (
        hooks.snapshot or torch_settings(prepared, spec.experiment.accelerator))


def busy_probe(spec: ChildSpec, prepared) -> Optional[Callable[[Callable[[], Any]], dict]]:
    """What measures the device's busy time per iteration after the timed runs
    (child/device_busy.py): on CUDA, for a stack whose work runs on torch's CUDA streams
    (it offers a device timer), unless --no-device-busy; else None."""
    from child.device_busy import measure_device_busy, reason_not_measured

    if not spec.settings.device_busy or reason_not_measured(
            spec.experiment.accelerator, prepared.device_timer() is not None) is not None:
        return None
    return measure_device_busy


def core_picker(spec: ChildSpec) -> Optional[CorePicker]:
    """The timing thread's core picker (--timing-core=fastest) on CUDA, where one host thread
    launches the work, when the child may use more than one core; else None."""
    cores = tuple(sorted(os.sched_getaffinity(0)))
    if (spec.settings.timing_core != "fastest" or spec.experiment.accelerator != "cuda"
            or len(cores) < 2):
        return None
    return CorePicker(cores)


def card_watch(spec: ChildSpec) -> Optional[GpuWatch]:
    """A watch of the experiment's card through NVML (child/gpu_state.py), or None off
    CUDA, before CUDA started, or where NVML cannot see the card (logged)."""
    if spec.experiment.accelerator != "cuda":
        return None
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    except Exception as error:  # the line matters more than the card's state
        log.warning("the card's UUID could not be read: %s", error)
        return None
    return GpuWatch.for_cuda_device(uuid)


def reference_reading(spec: ChildSpec, tries: int, warm: bool = True) -> Optional[dict[str, Any]]:
    """The reference workload's figures on the experiment's device over `tries` tries
    (child/reference.py), or None where it has none, could not run (logged), or is
    given no try."""
    from child.reference import measure_reference

    if not spec.settings.reference_workload or tries < 1:
        return None
    try:
        return measure_reference(spec.experiment.accelerator, tries, warm)
    except Exception as error:  # the experiment's line matters more than its reference
        log.warning("the reference workload could not run: %s: %s", type(error).__name__, error)
        return None


def verification_verdict(spec: ChildSpec, suite, stack, nondeterministic_reason) -> Verdict:
    """The verifier's verdict; a crash of the verifier itself is reported as its reason."""
    from child.verification import verify_experiment

    try:
        return verify_experiment(spec.model, spec.experiment, spec.settings, suite, stack,
                                 nondeterministic_reason)
    except Exception as error:
        log.exception("the verifier could not run")
        return Verdict.didnt_run(f"the verifier could not run: {type(error).__name__}: {error}")


def torch_settings(prepared: Optional[Any] = None, device_type: str = "cpu") -> dict[str, Any]:
    """The numeric and runtime settings in force (child/settings.py; docs/settings.md):
    with a prepared model, the grad mode and autocast its forward runs under and the inductor
    options its compile applies."""
    from child.settings import settings_snapshot

    return settings_snapshot(
        device_type,
        iteration_context=prepared.forward_context if prepared is not None else None,
        compile_options=prepared.inductor_options if prepared is not None else None)


class SettingsAtTimedCall(RunHooks):
    """The observers' hooks, and the settings snapshot taken just before the first timed run
    (outside its timing; about 11 ms the first time in a process, 1.6 ms after); then
    `on_first_timed_run`, when given (a shared GPU's gate lends nothing more)."""

    def __init__(self, observers: RunHooks, take: Callable[[], dict[str, Any]],
                 on_first_timed_run: Optional[Callable[[], None]] = None) -> None:
        self.observers = observers
        self.take = take
        self.on_first_timed_run = on_first_timed_run
        self.snapshot: Optional[dict[str, Any]] = None

    def before_timed_run(self, index: int) -> None:
        if self.snapshot is None:
            self.snapshot = self.take()
            if self.on_first_timed_run is not None:
                self.on_first_timed_run()
        self.observers.before_timed_run(index)

    def after_timed_run(self, index: int) -> None:
        self.observers.after_timed_run(index)

    def timed_run_output(self, index: int, result: Any) -> None:
        self.observers.timed_run_output(index, result)

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        self.observers.after_timed_runs(run_once, device_inputs)


def max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def pin(cores: tuple[int, ...]) -> None:
    """Run on `cores` only (before torch starts its thread pools)."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)


INDUCTOR_CONFIG = "torch._inductor.config"
COMPILE_THREADS_VARIABLE = "TORCHINDUCTOR_COMPILE_THREADS"


def size_compile_workers(warm_caches: bool) -> None:
    """Inductor's compile workers for this child (after `pin`). Where the caches already hold
    the experiment's compiles, none: inductor loads cached kernels in the child itself while
    its pool starts anyway, and on a GPU host the later timing processes waited a median 7 s
    (up to 9.6 s) for that pool, still importing torch, to shut down before their timed runs.
    Otherwise as many as inductor decides from this child's own cores and environment: a fork
    server that preloaded inductor decided from the server's cores, not the child's share."""
    if warm_caches:
        os.environ[COMPILE_THREADS_VARIABLE] = "1"
    config = sys.modules.get(INDUCTOR_CONFIG)
    if config is not None:
        config.compile_threads = config.decide_compile_threads()


INDUCTOR_CODE_CACHE = "torch._inductor.codecache"


def keep_precompiled_headers_on_the_host(spec: ChildSpec) -> None:
    """Inductor's precompiled C++ headers (which its CPU kernels include) in the host's
    folder, where torch keeps them for every process of the host and never in a fresh
    cache. Torch places them by the temporary folder it sees at import, the runner's
    scratch in a child: each sweep built them again (about 4 s of a core on a 2-core
    machine), in its first inductor compile only, so that its compile time held what the
    others' did not. Where this torch keeps them elsewhere, or not at all, nothing changes."""
    if spec.host_temp_dir is None or spec.experiment.dynamo != "inductor":
        return
    try:
        codecache = importlib.import_module(INDUCTOR_CODE_CACHE)
        # <temporary folder>/torchinductor_<user>/precompiled_headers, under the host's.
        folder = os.path.join(spec.host_temp_dir, *Path(codecache._HEADER_DIR).parts[-2:])
        lock_folder = os.path.join(folder, Path(codecache._HEADER_LOCK_DIR).name)
    except (ImportError, AttributeError, TypeError) as error:
        log.info("inductor's precompiled headers stay where this torch puts them: %s", error)
        return
    codecache._HEADER_DIR = folder
    codecache._HEADER_LOCK_DIR = lock_folder


def main(argv: list[str]) -> int:
    phases = Phases()
    die_with_parent()
    folder = Path(argv[0])
    spec = read_message(folder / SPEC_FILE, ChildSpec)
    pin(spec.cpu_set)
    size_compile_workers(spec.warm_caches)
    logging.basicConfig(level=spec.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = ChildResult(environment=environment_record())
    try:
        keep_precompiled_headers_on_the_host(spec)
        if spec.experiment.dynamo == "inductor":
            settle_isa_checks(os.environ.get(ISA_CHECKS_VARIABLE))
        run_child(spec, result, phases)
        result.status = Status.OK
    except ModelCannotRun as skip:
        result.status = Status.SKIPPED
        result.skip_reason = str(skip)
    except BaseException as error:  # everything the child hits is reported, not lost
        result.status = Status.FAILED
        result.error = ChildError(f"{type(error).__name__}: {error}", traceback.format_exc(),
                                  host_cause(error))
    result.summary["child_max_rss_bytes"] = max_rss_bytes()
    phases.mark("finish_s")
    result.summary["phases"] = phases.to_dict()
    try:
        write_message(folder / RESULT_FILE, result)
    except OSError as error:  # a full disk: the parent stops the sweep with this line
        print(f"cannot write {folder / RESULT_FILE}: {error.strerror or error}", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    return 0 if result.status is Status.OK else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
