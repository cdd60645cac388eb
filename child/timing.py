"""The timing loop (child side): warm-up apart, then timed runs that end synchronized.

The first warm-up iteration is the cold start (compilation included). The first
`iterations_per_run` warm-up iterations also form the cold-start run, which leads every
per-run list of the results line (`TimingResult.metrics`), as the first run does in
PyTorch/XLA's runner; `summary.cold_start_entries` says so, and our readers leave it out
of the steady state (core.schema.timed_values).

With a reference (eager on the same module: paired timing), the reference's runs are
interleaved with the stack's (A B A B ...) on the same inputs, so drift reaches both alike.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from backends.base import DeviceTimer, PreparedModel
from core.config import RunSettings
from core.fields import DEFAULT_SEED
from core.host.host_bound import host_bound_summary
from core.host.host_state import COLUMNS as HOST_COLUMNS
from core.host.host_state import empty_columns
from core.host.host_state import summarize as summarize_host_state
from core.schema import COLD_START_ENTRIES
from models.base import BenchmarkModel
from child.gpu_state import GpuWatch
from child.host_state import HostStateWatch
from child.reference import CorePicker
from child.trust import CpuWatch
from observers.base import RunHooks

HOST_CLOCK = "host"
CUDA_EVENTS_CLOCK = "cuda_events"


@dataclass
class ColdRun:
    """The first warm-up iterations as one run: host seconds, iterations, stack metrics."""

    total_time: float
    iterations: int
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class TimingResult:
    """Times in seconds: warm-up iterations, the cold-start run, then one value per timed run.

    `reference_*` hold the eager runs interleaved with the stack's (paired timing).
    """

    warmup_times: list[float] = field(default_factory=list)
    total_time: list[float] = field(default_factory=list)
    run_metrics: dict[str, list[Any]] = field(default_factory=dict)
    cold_run: Optional[ColdRun] = None
    reference_warmup_times: list[float] = field(default_factory=list)
    reference_total_time: list[float] = field(default_factory=list)
    peak_device_memory: Optional[int] = None
    reference_peak_device_memory: Optional[int] = None
    iterations_per_run: int = 1
    #: What timed the runs: the host clock, or CUDA events (--pure-wall-time).
    clock: str = HOST_CLOCK
    last_result: Any = None
    #: On a device with a timer (CUDA): per timed run, device seconds per iteration and
    #: the host's enqueue seconds per iteration; per timed iteration, its device span and
    #: enqueue time (empty where the timer knows only sums).
    device_time: list[float] = field(default_factory=list)
    enqueue_time: list[float] = field(default_factory=list)
    iteration_spans: list[float] = field(default_factory=list)
    iteration_enqueues: list[float] = field(default_factory=list)
    #: The host pulse after each timed run of the stack, in ms (child/reference.py), and the
    #: timing thread's CPU time over it: what the core's own speed made of a fixed piece of
    #: work at that moment, the waits for a core left out.
    host_pulses: list[float] = field(default_factory=list)
    host_pulse_cpu: list[float] = field(default_factory=list)
    #: Per iteration, the runs discarded and run again because the pulse after them said the
    #: timing thread's core had slowed down (with a core picker only).
    redone_per_iter_time: list[float] = field(default_factory=list)
    #: Where the timing thread ran: "fastest" (a core picker pinned it) or "any".
    timing_core: str = "any"
    #: What the timing thread met around each recorded timed run (child/host_state.py):
    #: one column per figure; None where nothing was read.
    host_windows: Optional[dict[str, list[Any]]] = None
    #: The device's busy time per iteration, from profiled iterations after the timed runs
    #: (child/device_busy.py), the stack's and the paired eager's; None where not measured.
    device_busy: Optional[dict[str, Any]] = None
    reference_device_busy: Optional[dict[str, Any]] = None
    #: Per timed run of the stack, CPU seconds per iteration: the timing thread's and the
    #: whole process's (child/trust.py, `cpu_time_summary`).
    thread_cpu_time: list[float] = field(default_factory=list)
    process_cpu_time: list[float] = field(default_factory=list)

    @property
    def per_iter_time(self) -> list[float]:
        """The timed runs only, per iteration."""
        return [t / self.iterations_per_run for t in self.total_time]

    @property
    def reference_per_iter_time(self) -> list[float]:
        return [t / self.iterations_per_run for t in self.reference_total_time]

    def metrics(self) -> dict[str, list[Any]]:
        """Per-run lists as the line holds them: the cold-start run first (when there was a
        warm-up), then the timed runs. A stack metric missing from one run reads None."""
        cold = self.cold_run
        lead_total = [cold.total_time] if cold else []
        lead_per_iter = [cold.total_time / cold.iterations] if cold else []
        metrics: dict[str, list[Any]] = {
            "total_time": lead_total + list(self.total_time),
            "per_iter_time": lead_per_iter + self.per_iter_time,
        }
        if self.reference_total_time:
            reference_cold = self.reference_warmup_times[:1] if cold else []
            metrics["eager_total_time"] = reference_cold + list(self.reference_total_time)
            metrics["eager_per_iter_time"] = reference_cold + self.reference_per_iter_time
            lead_speedup = ([reference_cold[0] / lead_per_iter[0]]
                            if reference_cold and lead_per_iter else [])
            metrics["paired_speedup"] = lead_speedup + [
                eager / compiled for eager, compiled in zip(self.reference_total_time,
                                                           self.total_time)]
        if self.device_time:
            lead = [None] if cold else []
            metrics["device_time"] = lead + list(self.device_time)
            metrics["enqueue_time"] = lead + list(self.enqueue_time)
        names = list(dict.fromkeys([*(cold.metrics if cold else {}), *self.run_metrics]))
        for name in names:
            lead = [cold.metrics.get(name)] if cold else []
            timed = self.run_metrics.get(name) or [None] * len(self.total_time)
            metrics[name] = lead + list(timed)
        return metrics

    def summary(self) -> dict[str, Any]:
        """Figures of the whole measurement: warm-up, cold start, compile time, how the
        lists start, peak device memory and the paired speedup."""
        summary: dict[str, Any] = {
            "warmup_times": list(self.warmup_times),
            COLD_START_ENTRIES: 1 if self.cold_run else 0,
            "timing_clock": self.clock,
            "timing_core": self.timing_core,
        }
        steady = statistics.median(self.per_iter_time) if self.total_time else None
        if self.warmup_times:
            summary["cold_start_time"] = self.warmup_times[0]
            if steady is not None:
                # The dashboard's compilation latency: the cold start (fresh compile cache)
                # less a steady-state iteration.
                summary["compile_time_s"] = max(self.warmup_times[0] - steady, 0.0)
        if self.peak_device_memory is not None:
            summary["peak_device_memory_bytes"] = self.peak_device_memory
        if self.iteration_spans:
            summary.update(host_bound_summary(self.iteration_spans, self.iteration_enqueues))
        if self.device_time:
            summary["median_device_time"] = statistics.median(self.device_time)
        if self.host_windows is not None:
            summary["host_windows"] = self.host_windows
            summary["host_state"] = summarize_host_state(self.host_windows)
        if self.device_busy is not None:
            summary["device_busy"] = dict(self.device_busy)
            summary["device_busy_ms"] = self.device_busy.get("ms")
            if self.reference_device_busy is not None:
                summary["device_busy"]["eager"] = self.reference_device_busy
                summary["eager_device_busy_ms"] = self.reference_device_busy.get("ms")
        if self.redone_per_iter_time:
            summary["redone_runs"] = {"count": len(self.redone_per_iter_time),
                                      "per_iter_time": list(self.redone_per_iter_time)}
        if self.reference_total_time and self.total_time:
            summary["paired_speedup"] = paired_speedup(self.reference_per_iter_time,
                                                       self.per_iter_time)
            if self.reference_peak_device_memory is not None:
                summary["eager_peak_device_memory_bytes"] = self.reference_peak_device_memory
        return summary


def paired_speedup(eager: list[float], compiled: list[float]) -> dict[str, Any]:
    """Speedup of interleaved runs as PyTorch's harness reports it (median eager over
    median compiled), the median of the per-pair ratios, and Welch's t-test p-value that
    the two samples have the same mean."""
    result: dict[str, Any] = {
        "method": "paired",
        "pairs": len(compiled),
        "speedup": statistics.median(eager) / statistics.median(compiled),
        "median_of_pairs": statistics.median(e / c for e, c in zip(eager, compiled)),
        "eager_median_per_iter_time": statistics.median(eager),
        "p_value": None,
    }
    if len(compiled) >= 2:
        from scipy import stats

        p_value = float(stats.ttest_ind(eager, compiled, equal_var=False).pvalue)
        result["p_value"] = p_value if math.isfinite(p_value) else None
    return result


def input_seeds(settings: RunSettings, seed: int = DEFAULT_SEED) -> list[int]:
    """One seed per distinct input set, from the experiment's: several only with
    --randomize-input."""
    count = settings.iterations_per_run if settings.randomize_input else 1
    return [seed + offset for offset in range(count)]


def _iteration(prepared: PreparedModel, device_inputs: Any) -> Any:
    result = prepared.step(device_inputs)
    if prepared.sync_every_iteration:
        prepared.sync_iteration()
    return result


def _run(prepared: PreparedModel, inputs: list[Any], iterations: int,
         timer: Optional[DeviceTimer] = None,
         enqueues: Optional[list[float]] = None) -> Any:
    """One run: `iterations` iterations, then the stack's synchronization. With a device
    timer, each iteration is bracketed by its events, and the host's time to queue it (from
    before its first event to after its last) goes to `enqueues`."""
    result = None
    for index in range(iterations):
        result = None  # one iteration's outputs alive at a time
        if timer is not None:
            queued = time.perf_counter()
            timer.begin()
        result = _iteration(prepared, inputs[index % len(inputs)])
        if timer is not None:
            timer.end()
            if enqueues is not None:
                enqueues.append(time.perf_counter() - queued)
    prepared.sync_run(result)
    return result


def warm_up(prepared: PreparedModel, inputs: list[Any], count: int,
            cold_iterations: int = 0, clock: Callable[[], float] = time.perf_counter,
            ) -> tuple[list[float], Optional[ColdRun]]:
    """`count` synchronized iterations, each timed by `clock` (the first is the cold start).
    The first `cold_iterations` of them form the cold-start run, with the stack's per-run
    metrics."""
    times: list[float] = []
    cold = None
    if cold_iterations:
        prepared.begin_timed_run()
    for index in range(count):
        result = None  # the last iteration's outputs must not count in this one's memory
        start = clock()
        result = _iteration(prepared, inputs[index % len(inputs)])
        prepared.sync_run(result)
        times.append(clock() - start)
        if index + 1 == cold_iterations:
            cold = ColdRun(sum(times), cold_iterations, dict(prepared.end_timed_run()))
    return times, cold


@dataclass
class RunTimes:
    """One timed run: host seconds, and with a device timer the device's seconds, each
    iteration's device span (None where the timer knows only the sum) and enqueue time."""

    host: float
    device: Optional[float] = None
    spans: Optional[list[float]] = None
    enqueues: list[float] = field(default_factory=list)
    #: CPU seconds of the run: the calling (timing) thread's and the whole process's.
    thread_cpu: Optional[float] = None
    process_cpu: Optional[float] = None


def timed_run(prepared: PreparedModel, inputs: list[Any], iterations: int,
              timer: Optional[DeviceTimer] = None) -> tuple[RunTimes, Any]:
    """One run timed by the host clock and, when there is a device timer, by the device."""
    enqueues: list[float] = []
    # The CPU clocks are read outside the wall clock's bracket: their cost is not timed.
    thread_start, process_start = time.thread_time(), time.process_time()
    start = time.perf_counter()
    result = _run(prepared, inputs, iterations, timer, enqueues)
    host = time.perf_counter() - start
    times = RunTimes(host, enqueues=enqueues, thread_cpu=time.thread_time() - thread_start,
                     process_cpu=time.process_time() - process_start)
    if timer is not None:
        times.spans = timer.span_seconds()
        times.device = sum(times.spans) if times.spans is not None else timer.seconds()
    return times, result


@dataclass
class Timed:
    """One model as the timing loop runs it: the prepared model, its inputs on its device
    (one set per input seed) and, where it offers one and it is used, its device timer."""

    prepared: PreparedModel
    inputs: list[Any]
    timer: Optional[DeviceTimer] = None

    @classmethod
    def of(cls, prepared: PreparedModel, bench: BenchmarkModel, seeds: list[int],
           use_timer: bool) -> "Timed":
        inputs = [prepared.inputs_to_device(bench.make_inputs(seed)) for seed in seeds]
        return cls(prepared, inputs, prepared.device_timer() if use_timer else None)

    def run(self, iterations: int) -> tuple[RunTimes, Any]:
        """One timed run (`timed_run`)."""
        return timed_run(self.prepared, self.inputs, iterations, self.timer)


def warm_up_reference(reference: Timed, settings: RunSettings, timing: TimingResult) -> None:
    """The reference's warm-up (at least one iteration) and its peak device memory."""
    reference.prepared.reset_peak_device_memory()
    timing.reference_warmup_times, _ = warm_up(reference.prepared, reference.inputs,
                                               max(settings.warmup, 1))
    timing.reference_peak_device_memory = reference.prepared.peak_device_memory_bytes()


def cold_start(stack: Timed, settings: RunSettings, timing: TimingResult,
               core_picker: Optional[CorePicker],
               clock: Callable[[], float] = time.perf_counter) -> None:
    """The stack's warm-up, its first iterations the cold-start run, then its peak device
    memory; with a core picker, on a fast core once the stack's background work started.
    `clock` times the warm-up (a shared GPU's gate stops it while the child waits)."""
    prepared = stack.prepared
    prepared.reset_peak_device_memory()
    if core_picker is not None:
        # Inductor tunes each kernel at its first call by timing its configurations with the
        # host's launching inside the timing; on a core running at half speed it keeps slower
        # ones (docs/timing.md, "The cold start on the fastest core too").
        prepared.start_background_work()
        core_picker.pick()
    timing.warmup_times, timing.cold_run = warm_up(
        prepared, stack.inputs, settings.warmup, min(settings.iterations_per_run, settings.warmup),
        clock)
    timing.peak_device_memory = prepared.peak_device_memory_bytes()
    prepared.settle()


@dataclass
class Watches:
    """What spans the timed runs: the cores (`cpu`), the card (`device`), the host's speed
    read after each run of the stack (`pulse`), the core picker of the timing thread, and
    what that thread met around each run (`host`)."""

    cpu: Optional[CpuWatch] = None
    device: Optional[GpuWatch] = None
    pulse: Optional[Callable[[], float]] = None
    core_picker: Optional[CorePicker] = None
    host: Optional[HostStateWatch] = None

    def start(self, timing: TimingResult) -> None:
        if self.cpu is not None:
            self.cpu.start()
        if self.device is not None:
            self.device.start()
        if self.core_picker is not None:
            timing.timing_core = "fastest"
            self.core_picker.pick()

    def stop(self) -> None:
        if self.core_picker is not None:
            self.core_picker.release()
        if self.device is not None:
            self.device.stop()
        if self.cpu is not None:
            self.cpu.stop()


@dataclass
class RunOutcome:
    """One timed run of the stack (and the reference's run before it): what it measured."""

    times: RunTimes
    clocked: float
    metrics: dict[str, Any]
    result: Any
    pulse_ms: Optional[float] = None
    pulse_cpu_ms: Optional[float] = None
    #: The reference's run before it (paired timing), by the reference's clock.
    reference_clocked: Optional[float] = None
    #: What the timing thread met from before the reference's run to after the stack's.
    host_window: Optional[dict[str, Any]] = None


def run_once(stack: Timed, reference: Optional[Timed], iterations: int, clock: str,
             pulse: Optional[Callable[[], float]], before: Callable[[], None],
             previous: Optional[RunOutcome] = None,
             host: Optional[HostStateWatch] = None) -> RunOutcome:
    """The reference's run (paired timing), `before` (the hooks), then the stack's run,
    timed by `clock`, its per-run metrics, then the pulse, outside the timing. The
    previous run's outputs are let go just before the stack's run, so that they do not
    count in its memory. `host` reads the timing thread's state before the reference's
    run and after the stack's (outside both timings, before the pulse)."""
    reference_clocked = None
    if host is not None:
        host.begin()
    if reference is not None:
        reference_times, _ = reference.run(iterations)
        reference_clocked = (reference_times.device if reference.timer is not None
                             else reference_times.host)
    before()
    stack.prepared.begin_timed_run()
    if previous is not None:
        previous.result = None
    times, result = stack.run(iterations)
    clocked = times.device if clock == CUDA_EVENTS_CLOCK else times.host
    metrics = stack.prepared.end_timed_run()
    window = host.end() if host is not None else None
    pulse_ms = pulse_cpu_ms = None
    if pulse is not None:
        cpu_start = time.thread_time()
        pulse_ms = pulse()
        pulse_cpu_ms = (time.thread_time() - cpu_start) * 1e3
    return RunOutcome(times, clocked, metrics, result, pulse_ms, pulse_cpu_ms,
                      reference_clocked, window)


def record_run(timing: TimingResult, outcome: RunOutcome, iterations: int) -> None:
    """One timed run's figures into the result."""
    if outcome.reference_clocked is not None:
        timing.reference_total_time.append(outcome.reference_clocked)
    timing.total_time.append(outcome.clocked)
    times = outcome.times
    if times.thread_cpu is not None and times.process_cpu is not None:
        timing.thread_cpu_time.append(times.thread_cpu / iterations)
        timing.process_cpu_time.append(times.process_cpu / iterations)
    if times.device is not None:
        timing.device_time.append(times.device / iterations)
        timing.enqueue_time.append(sum(times.enqueues) / iterations)
        if times.spans is not None:
            timing.iteration_spans.extend(times.spans)
            timing.iteration_enqueues.extend(times.enqueues)
    for name, value in outcome.metrics.items():
        timing.run_metrics.setdefault(name, []).append(value)
    if outcome.pulse_ms is not None:
        timing.host_pulses.append(outcome.pulse_ms)
    if outcome.pulse_cpu_ms is not None:
        timing.host_pulse_cpu.append(outcome.pulse_cpu_ms)
    if outcome.host_window is not None:
        if timing.host_windows is None:
            timing.host_windows = empty_columns()
        for name in HOST_COLUMNS:
            timing.host_windows[name].append(outcome.host_window.get(name))


def timed_runs(stack: Timed, reference: Optional[Timed], settings: RunSettings,
               timing: TimingResult, hooks: RunHooks, watches: Watches) -> Any:
    """`repeat` timed runs, each recorded and shown to the hooks; the last run's output.

    With a core picker and a pulse, a run after which the pulse says the core slowed down
    is run again on a newly picked core, up to `repeat` times in all (the discarded runs are
    kept in `redone_per_iter_time`); the hooks see each run index once."""
    iterations = settings.iterations_per_run
    picker = watches.core_picker
    redos_left = settings.repeat if picker is not None and watches.pulse is not None else 0
    outcome: Optional[RunOutcome] = None
    for run_index in range(settings.repeat):
        for attempt in itertools.count():
            # The hooks see each run index once, however often it is run.
            before = (lambda: hooks.before_timed_run(run_index)) if attempt == 0 else (lambda: None)
            outcome = run_once(stack, reference, iterations, timing.clock, watches.pulse, before,
                               outcome, watches.host)
            if not (redos_left and picker.slowed(outcome.pulse_ms)):
                break
            redos_left -= 1
            timing.redone_per_iter_time.append(outcome.clocked / iterations)
            picker.pick()
        record_run(timing, outcome, iterations)
        if outcome.pulse_ms is not None and picker is not None:
            picker.follow(outcome.pulse_ms)
        hooks.after_timed_run(run_index)
        hooks.timed_run_output(run_index, outcome.result)
    return outcome.result if outcome is not None else None


def measure(
    prepared: PreparedModel,
    bench: BenchmarkModel,
    settings: RunSettings,
    hooks: Optional[RunHooks] = None,
    reference: Optional[PreparedModel] = None,
    watch: Optional[CpuWatch] = None,
    seed: int = DEFAULT_SEED,
    device_watch: Optional[GpuWatch] = None,
    pulse: Optional[Callable[[], float]] = None,
    core_picker: Optional[CorePicker] = None,
    warmup_clock: Callable[[], float] = time.perf_counter,
    host_watch: Optional[HostStateWatch] = None,
    device_busy: Optional[Callable[[Callable[[], Any]], dict[str, Any]]] = None,
) -> TimingResult:
    """Warm up (the first iteration is the cold start), then time `repeat` runs.

    The stack's per-run metrics are collected for the cold-start run too (the first
    `iterations_per_run` warm-up iterations). With a `reference` (eager on the same module),
    each timed run of the stack follows a timed run of the reference on the same inputs;
    the reference warms up first, so the stack's cold start holds its compilation and not
    the device's start-up. With --pure-wall-time, a stack that offers a device timer (CUDA)
    has each timed run's iterations timed between device events. `hooks` see each timed run
    of the stack after it is measured, then may run untimed runs of their own. `watch` (the
    cores) and `device_watch` (the card) span the timed runs; `pulse`, when given, is read
    after each timed run of the stack, outside its timing (the host's speed meanwhile).
    A `core_picker` pins this thread to a fast core for the cold start (after the stack's
    background work has started on all the cores) and again for the timed runs, and gives
    it its cores back after them; with `pulse`, a run after which the pulse reads slow is
    discarded and run again on a newly picked core (at most `repeat` such runs;
    `summary.redone_runs` keeps them), and once none may be, the next run starts on a newly
    picked core. `warmup_clock` times the stack's warm-up: on a GPU shared by several
    slots, a clock that stops while the child waits for its turn on the card
    (child/device_gate.py). `host_watch` reads the timing thread's state around each timed
    run (`summary.host_windows`, `summary.host_state`). `device_busy`, given a function that
    runs one iteration and synchronizes, measures the device's busy time per iteration
    (child/device_busy.py): after the timed runs, for the stack and the paired eager.

    The parts, each with one job: `Timed.of` (inputs and timer), `warm_up_reference`,
    `cold_start`, `Watches` (what spans the timed runs), `timed_runs` (`run_once`,
    `record_run`).
    """
    hooks = hooks or RunHooks()
    seeds = input_seeds(settings, seed)
    # Where the stack offers a device timer (CUDA), every timed iteration is bracketed by
    # its events: the device time and host-bound iterations are recorded; the device's
    # clock times the runs only with --pure-wall-time.
    stack = Timed.of(prepared, bench, seeds, use_timer=True)
    timing = TimingResult(iterations_per_run=settings.iterations_per_run)
    if stack.timer is not None and settings.pure_wall_time:
        timing.clock = CUDA_EVENTS_CLOCK
    paired = None
    if reference is not None:
        paired = Timed.of(reference, bench, seeds, use_timer=settings.pure_wall_time)
        warm_up_reference(paired, settings, timing)
    cold_start(stack, settings, timing, core_picker, warmup_clock)
    watches = Watches(watch, device_watch, pulse, core_picker, host_watch)
    watches.start(timing)
    timing.last_result = timed_runs(stack, paired, settings, timing, hooks, watches)
    watches.stop()
    if device_busy is not None:
        timing.device_busy = device_busy(lambda: _run(prepared, stack.inputs, 1))
        if paired is not None:
            timing.reference_device_busy = device_busy(
                lambda: _run(paired.prepared, paired.inputs, 1))
    hooks.after_timed_runs(lambda: _run(prepared, stack.inputs, settings.iterations_per_run),
                           stack.inputs)
    return timing
