"""Can a line's timings be trusted? CPU contention and run-to-run variation (child side).

During the timed runs the child watches the cores it is pinned to: how busy they were
(`psutil.cpu_times(percpu=True)`, steal included) against its own CPU time. What the
cores did beyond the child's own work was done by other processes: contention. The
line is flagged unreliable when others used more than `CONTENTION_BOUND` of the pinned
cores' capacity, or when the runs vary by more than `VARIATION_BOUND` (relative standard
deviation, as pyperf warns about), and the reasons are given.

What slows a launch-bound model without any other process on its cores is recorded too, for
the cause to be read off the line: the share of the cores' time the hypervisor gave to other
guests (steal), and how often the kernel moved the child's main thread, which queues the
device's work, to another core or preempted it (`/proc/self/sched`).

Two hardware threads of one physical core (SMT siblings) share its execution units, so a
process busy on a sibling the child is not pinned to slows the child as surely as one on its
own cores, and is invisible to that count. The watch therefore also reads the siblings of
the child's cores that lie outside its set (`core.host.cpus.outside_siblings`), and flags a line
whose siblings others kept busy beyond the same bound.

A figure contention does not move: the timing thread's CPU time per iteration
(`cpu_time_summary`). Where that thread did the process's work (one compute thread, the
stack computing on the calling thread: eager and inductor on the CPU, not XLA's or JAX's
thread pools), time another process took of its core is wall time, not CPU time. `compare`
judges a contended CPU line by it (reports/analyse/compare.py).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import psutil

from core.host.cpus import outside_siblings, thread_siblings

#: Share of the pinned cores' capacity that other processes may use before a line is flagged.
CONTENTION_BOUND = 0.10
#: Relative standard deviation of the timed runs beyond which a line is flagged.
VARIATION_BOUND = 0.10
#: Fewest runs for which variation is judged.
MIN_RUNS_FOR_VARIATION = 3
#: The share of the process's CPU time its timing thread must have taken in the timed runs for
#: that thread's CPU time to stand for the experiment's work.
TIMING_THREAD_SHARE = 0.9
#: CPU times tick every 10 ms: a shorter window of timed runs is judged by an idle probe
#: of this length right after them instead.
MIN_WINDOW_SECONDS = 0.25


@dataclass(frozen=True)
class CpuSample:
    """One reading of the clock, the child's CPU time and its cores' busy time."""

    wall: float
    process_cpu: float
    cores_busy: float
    load_average: tuple[float, float, float]
    #: Busy seconds of the SMT siblings outside the child's cores.
    siblings_busy: float = 0.0
    #: Seconds the hypervisor ran other guests on the child's cores (steal).
    cores_steal: float = 0.0
    #: The main thread's scheduling: where it ran last and its counts so far (None where
    #: the kernel does not tell).
    main_thread: Optional["MainThreadSample"] = None


@dataclass(frozen=True)
class MainThreadSample:
    """The child's main thread (the one that queues the device's work) as the kernel sees
    it: the CPU it ran on last, how often it was moved between CPUs, and how often it was
    preempted (involuntary context switches)."""

    cpu: Optional[int]
    migrations: int
    preemptions: int


#: The kernel's scheduling counts of this process's main thread (CONFIG_SCHED_DEBUG).
SCHED_FILE = "/proc/self/sched"


def read_main_thread(path: str = SCHED_FILE) -> Optional[MainThreadSample]:
    """The main thread's scheduling counts now, or None where `path` cannot be read."""
    try:
        with open(path) as file:
            text = file.read()
    except OSError:
        return None
    counts = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        counts[name.strip()] = value.strip()
    try:
        migrations = int(counts["se.nr_migrations"])
        preemptions = int(counts["nr_involuntary_switches"])
    except (KeyError, ValueError):
        return None
    try:
        cpu = psutil.Process().cpu_num()
    except (psutil.Error, AttributeError):
        cpu = None
    return MainThreadSample(cpu, migrations, preemptions)


def _busy_seconds(times: Any) -> float:
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = sum(getattr(times, name) for name in times._fields
                if name not in ("guest", "guest_nice"))  # guest time is counted in user too
    return total - idle


def take_sample(cores: Sequence[int], siblings: Sequence[int] = ()) -> CpuSample:
    """Read the clocks now (cores: the CPU set the child is pinned to; siblings: the SMT
    siblings of those cores outside it)."""
    per_cpu = psutil.cpu_times(percpu=True)

    def busy(cpus: Sequence[int]) -> float:
        return sum(_busy_seconds(per_cpu[cpu]) for cpu in cpus if cpu < len(per_cpu))

    steal = sum(getattr(per_cpu[cpu], "steal", 0.0) for cpu in cores if cpu < len(per_cpu))
    own = psutil.Process().cpu_times()
    return CpuSample(time.perf_counter(), own.user + own.system, busy(cores), os.getloadavg(),
                     busy(siblings), steal, read_main_thread())


@dataclass
class CpuWindow:
    """What happened on the child's cores between two samples."""

    cores: tuple[int, ...]
    threads: int
    start: CpuSample
    end: CpuSample
    cpu_freq_mhz: Optional[float] = None
    #: When the timed runs were too short to judge: an idle stretch measured after them.
    probe: Optional[tuple[CpuSample, CpuSample]] = None
    #: The SMT siblings of `cores` outside them.
    siblings: tuple[int, ...] = ()

    @property
    def wall_s(self) -> float:
        return max(self.end.wall - self.start.wall, 1e-9)

    @property
    def process_cpu_s(self) -> float:
        return max(self.end.process_cpu - self.start.process_cpu, 0.0)

    @property
    def others_cpu_s(self) -> float:
        """CPU seconds spent on the child's cores by anything but the child."""
        return max(self.end.cores_busy - self.start.cores_busy - self.process_cpu_s, 0.0)

    def _judged(self) -> tuple[CpuSample, CpuSample]:
        """The samples others' use is judged between: the probe's, if there was one."""
        return self.probe if self.probe is not None else (self.start, self.end)

    def _share(self, seconds: Callable[[CpuSample, CpuSample], float], cpus: int) -> float:
        """`seconds` between the judged samples, as a share of `cpus` CPUs' capacity."""
        first, last = self._judged()
        return max(seconds(first, last), 0.0) / (max(last.wall - first.wall, 1e-9)
                                                  * max(cpus, 1))

    @property
    def others_fraction(self) -> float:
        """The share of the cores' capacity others used (in the probe, if there was one)."""
        return self._share(lambda first, last: (last.cores_busy - first.cores_busy)
                           - (last.process_cpu - first.process_cpu), len(self.cores))

    @property
    def siblings_busy_fraction(self) -> Optional[float]:
        """The share of the outside siblings' capacity in use (in the probe, if there was
        one); None where the child's cores have no sibling outside its set."""
        if not self.siblings:
            return None
        return self._share(lambda first, last: last.siblings_busy - first.siblings_busy,
                           len(self.siblings))

    @property
    def steal_fraction(self) -> float:
        """The share of the cores' capacity that the hypervisor gave to other guests (in the
        probe, if there was one; a part of what `others_fraction` counts)."""
        return self._share(lambda first, last: last.cores_steal - first.cores_steal,
                           len(self.cores))

    def main_thread(self) -> Optional[dict[str, Any]]:
        """How the kernel scheduled the main thread over the window: the CPUs it ran on at
        its start and end, its moves between CPUs and its preemptions; None where unknown."""
        first, last = self.start.main_thread, self.end.main_thread
        if first is None or last is None:
            return None
        return {"cpu_at_start": first.cpu, "cpu_at_end": last.cpu,
                "migrations": last.migrations - first.migrations,
                "preemptions": last.preemptions - first.preemptions}

    def to_dict(self) -> dict[str, Any]:
        return {
            "steal_fraction": self.steal_fraction,
            "main_thread": self.main_thread(),
            "cores": list(self.cores),
            "smt_siblings": list(self.siblings),
            "siblings_busy_fraction": self.siblings_busy_fraction,
            "threads": self.threads,
            "wall_s": self.wall_s,
            "process_cpu_s": self.process_cpu_s,
            "process_cpu_per_wall": self.process_cpu_s / self.wall_s,
            "others_cpu_s": self.others_cpu_s,
            "others_fraction": self.others_fraction,
            "others_measured": "idle probe after the timed runs" if self.probe else "timed runs",
            "load_average_before": list(self.start.load_average),
            "load_average_after": list(self.end.load_average),
            "cpu_freq_mhz": self.cpu_freq_mhz,
        }


class CpuWatch:
    """Watches the child's cores over the timed runs: `start()`, then `stop()`."""

    def __init__(self, threads: int, cores: Optional[Sequence[int]] = None,
                 siblings: Callable[[int], Sequence[int]] = thread_siblings) -> None:
        self.cores = tuple(sorted(cores if cores is not None else os.sched_getaffinity(0)))
        self.siblings = outside_siblings(self.cores, siblings)
        self.threads = threads
        self._start: Optional[CpuSample] = None
        self.window: Optional[CpuWindow] = None

    def _sample(self) -> CpuSample:
        return take_sample(self.cores, self.siblings)

    def start(self) -> None:
        self._start = self._sample()

    def stop(self) -> CpuWindow:
        if self._start is None:
            raise RuntimeError("CpuWatch.stop() before start()")
        end = self._sample()
        frequency = psutil.cpu_freq()
        probe = None
        if end.wall - self._start.wall < MIN_WINDOW_SECONDS:
            first = self._sample()
            time.sleep(MIN_WINDOW_SECONDS)
            probe = (first, self._sample())
        self.window = CpuWindow(self.cores, self.threads, self._start, end,
                                frequency.current if frequency else None, probe, self.siblings)
        return self.window


def relative_spread(values: Sequence[float]) -> Optional[float]:
    """Standard deviation over mean, or None with too few values to judge."""
    if len(values) < MIN_RUNS_FOR_VARIATION:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


@dataclass
class TrustVerdict:
    """Whether the timings can be trusted, and why not."""

    unreliable: bool
    reasons: list[str] = field(default_factory=list)
    variation: Optional[float] = None
    #: Other processes used the child's cores (or their SMT siblings) beyond the bound.
    contended: bool = False


def judge(per_iter_times: Sequence[float], window: Optional[CpuWindow],
          variation_bound: float = VARIATION_BOUND,
          contention_bound: float = CONTENTION_BOUND) -> TrustVerdict:
    """Flag timings that vary too much or that ran while others used the child's cores."""
    reasons = []
    variation = relative_spread(per_iter_times)
    if variation is not None and variation > variation_bound:
        reasons.append(f"the timed runs vary by {variation:.0%} (relative standard deviation; "
                       f"bound {variation_bound:.0%})")
    contended = False
    if window is not None and window.others_fraction > contention_bound:
        contended = True
        reasons.append(
            f"contention: other processes used {window.others_fraction:.0%} of the "
            f"{len(window.cores)} core(s) this child was pinned to during the timed runs "
            f"(bound {contention_bound:.0%}); load average "
            f"{window.end.load_average[0]:.2f}")
    sibling_load = window.siblings_busy_fraction if window is not None else None
    if sibling_load is not None and sibling_load > contention_bound:
        contended = True
        reasons.append(
            f"contention through shared physical cores: other processes kept "
            f"{sibling_load:.0%} of the {len(window.siblings)} SMT sibling(s) of this child's "
            f"cores busy during the timed runs (bound {contention_bound:.0%})")
    return TrustVerdict(bool(reasons), reasons, variation, contended)


def cpu_time_summary(thread_cpu: Sequence[float], process_cpu: Sequence[float],
                     accelerator: str, threads: int,
                     pulse_cpu: Sequence[float] = ()) -> dict[str, Any]:
    """The line's `cpu_time` (the timing thread's and the process's CPU seconds per
    iteration over the timed runs, medians in ms, the thread's share; with the host pulse
    after each run, `pulse_ms`, the median of that thread's CPU milliseconds over the pulses,
    the core's own speed while the model ran, which the CPU time follows, and `in_pulses`,
    the median over runs of the run's CPU time per iteration over the pulse after it: a
    figure the core's speed moves far less) and `cpu_time_ms`:
    the thread's figure where it did the work (on the CPU, one compute thread, at least
    `TIMING_THREAD_SHARE` of the process's CPU time), else None with the reason in
    `cpu_time.reason`. With more compute threads the timing thread's CPU time holds its spin
    at each barrier while another thread waits for a core: contention moves it too."""
    if not thread_cpu or len(thread_cpu) != len(process_cpu):
        return {}
    share = sum(thread_cpu) / sum(process_cpu) if sum(process_cpu) > 0 else None
    found: dict[str, Any] = {"ms": statistics.median(thread_cpu) * 1e3,
                             "process_ms": statistics.median(process_cpu) * 1e3,
                             "timing_thread_share": share}
    if pulse_cpu and len(pulse_cpu) == len(thread_cpu) and min(pulse_cpu) > 0:
        found["pulse_ms"] = statistics.median(pulse_cpu)
        found["in_pulses"] = statistics.median(
            run * 1e3 / pulse for run, pulse in zip(thread_cpu, pulse_cpu))
    if accelerator != "cpu":
        found["reason"] = f"on {accelerator} the host thread's CPU time is not the work's"
    elif threads != 1:
        found["reason"] = f"{threads} compute threads: contention moves their CPU time too"
    elif share is None or share < TIMING_THREAD_SHARE:
        found["reason"] = (f"the timing thread took {share or 0.0:.0%} of the process's CPU time "
                           f"(under {TIMING_THREAD_SHARE:.0%}): the work ran on other threads")
    return {"cpu_time": found, "cpu_time_ms": None if "reason" in found else found["ms"]}
