"""What the timing thread met around each timed run (child side): its CPU, moves, switches,
faults, its CPU's steal, SMT sibling, frequency and NUMA node, and the card's SM clock.

Read just before a timed run and just after it, outside its timing, from the calling thread
(the one that launches the work): `getrusage(RUSAGE_THREAD)` (switches, faults),
`sched_getcpu` (its CPU), `/proc/thread-self/sched` (its migrations, where the kernel keeps
them), `/proc/thread-self/schedstat` (its time waiting, runnable, for a CPU), one line of `/proc/stat` per CPU (steal, the sibling's busy time) and the CPU's
`cpufreq/scaling_cur_freq` where the host offers it; on CUDA the card through NVML
(child/gpu_state.py). A reading costs tens of microseconds (`read_us` in each run); the
columns and their sum-up are core/host/host_state.py's.
"""

from __future__ import annotations

import ctypes
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from core.host.cpus import thread_siblings

#: The calling thread's scheduling counts (CONFIG_SCHED_DEBUG kernels).
THREAD_SCHED_FILE = "/proc/thread-self/sched"
#: The calling thread's status line by line (field 39: the CPU it last ran on).
THREAD_STAT_FILE = "/proc/thread-self/stat"
#: The calling thread's time on a CPU, time waiting for one, and time slices (ns, ns, count).
THREAD_SCHEDSTAT_FILE = "/proc/thread-self/schedstat"
PROC_STAT = "/proc/stat"
CPU_DIR = "/sys/devices/system/cpu/cpu{cpu}"
FREQ_FILE = CPU_DIR + "/cpufreq/scaling_cur_freq"
#: /proc/stat's columns after the CPU's name: user nice system idle iowait irq softirq steal.
_IDLE, _IOWAIT, _STEAL = 3, 4, 7
_BUSY_COLUMNS = 8  # guest time is counted in user already


@dataclass(frozen=True)
class ThreadReading:
    """One reading of the timing thread and its CPU."""

    wall: float
    cpu: Optional[int]
    migrations: Optional[int]
    voluntary: int
    involuntary: int
    minor_faults: int
    major_faults: int
    #: Per CPU read (the thread's and its siblings): steal and busy time in clock ticks.
    ticks: dict[int, tuple[int, int]] = field(default_factory=dict)
    freq_mhz: Optional[float] = None
    run_delay_ns: Optional[int] = None
    sm_mhz: Optional[int] = None


def _libc_getcpu() -> Optional[Callable[[], int]]:
    try:
        getcpu = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    getcpu.restype = ctypes.c_int
    getcpu.argtypes = []
    return getcpu


def _stat_cpu() -> Optional[int]:
    try:
        text = Path(THREAD_STAT_FILE).read_text()
        return int(text.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def read_migrations(path: str = THREAD_SCHED_FILE) -> Optional[int]:
    """The calling thread's moves between CPUs so far, or None where the kernel keeps none."""
    try:
        with open(path, "rb") as file:
            text = file.read()
        at = text.index(b"se.nr_migrations")
        return int(text[text.index(b":", at) + 1:text.index(b"\n", at)])
    except (OSError, ValueError):
        return None


def read_run_delay_ns(path: str = THREAD_SCHEDSTAT_FILE) -> Optional[int]:
    """How long the calling thread has waited, runnable, for a CPU so far (ns); None where
    the kernel does not say."""
    try:
        with open(path, "rb") as file:
            return int(file.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def read_cpu_ticks(cpus: Sequence[int], path: str = PROC_STAT) -> dict[int, tuple[int, int]]:
    """For each of `cpus`: its steal and busy clock ticks so far ({} where unreadable)."""
    found: dict[int, tuple[int, int]] = {}
    try:
        with open(path, "rb") as file:
            text = file.read()
        for cpu in cpus:
            at = text.index(b"\ncpu%d " % cpu)
            values = [int(value) for value in
                      text[at + 1:text.index(b"\n", at + 1)].split()[1:1 + _BUSY_COLUMNS]]
            idle = values[_IDLE] + values[_IOWAIT]
            found[cpu] = (values[_STEAL] if len(values) > _STEAL else 0, sum(values) - idle)
    except (OSError, ValueError, IndexError):
        return found
    return found


def read_freq_mhz(cpu: int) -> Optional[float]:
    """The CPU's current frequency (MHz) as cpufreq gives it; None where the host does not."""
    try:
        with open(FREQ_FILE.format(cpu=cpu), "rb") as file:
            return int(file.read()) / 1e3
    except (OSError, ValueError):
        return None


def numa_node(cpu: int) -> Optional[int]:
    """The NUMA node of `cpu` (its `nodeN` entry in sysfs); None where none is listed."""
    try:
        for entry in os.listdir(CPU_DIR.format(cpu=cpu)):
            if entry.startswith("node") and entry[4:].isdigit():
                return int(entry[4:])
    except OSError:
        return None
    return None


class HostStateWatch:
    """Reads the timing thread's state around each timed run: `begin()` before the run,
    `end()` after it gives the run's entry (the columns of core.host.host_state). `card` (a
    `child.gpu_state.GpuWatch`) adds the card's SM clock and performance state."""

    def __init__(self, card: Any = None,
                 siblings: Callable[[int], Sequence[int]] = thread_siblings) -> None:
        self.card = card
        self._siblings = siblings
        self._getcpu = _libc_getcpu()
        self._topology: dict[int, tuple[tuple[int, ...], Optional[int]]] = {}
        #: The CPUs whose frequency could not be read (not tried again).
        self._no_freq: set[int] = set()
        self._start: Optional[ThreadReading] = None

    def _cpu(self) -> Optional[int]:
        if self._getcpu is not None:
            cpu = self._getcpu()
            if cpu >= 0:
                return cpu
        return _stat_cpu()

    def _topology_of(self, cpu: int) -> tuple[tuple[int, ...], Optional[int]]:
        """The CPU's SMT siblings (itself left out) and NUMA node, read once per CPU."""
        if cpu not in self._topology:
            others = tuple(sibling for sibling in self._siblings(cpu) if sibling != cpu)
            self._topology[cpu] = (others, numa_node(cpu))
        return self._topology[cpu]

    def read(self, cpus: Sequence[int] = ()) -> ThreadReading:
        """The thread's state now, with the ticks of `cpus` (else its CPU and siblings)."""
        usage = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
        cpu = self._cpu()
        if not cpus and cpu is not None:
            cpus = (cpu, *self._topology_of(cpu)[0])
        sm_mhz = None
        if self.card is not None:
            sm_mhz = self.card.sm_clock_mhz()
        return ThreadReading(
            time.perf_counter(), cpu, read_migrations(), usage.ru_nvcsw, usage.ru_nivcsw,
            usage.ru_minflt, usage.ru_majflt, read_cpu_ticks(cpus) if cpus else {},
            self._freq(cpu), read_run_delay_ns(), sm_mhz)

    def _freq(self, cpu: Optional[int]) -> Optional[float]:
        if cpu is None or cpu in self._no_freq:
            return None
        freq = read_freq_mhz(cpu)
        if freq is None:
            self._no_freq.add(cpu)
        return freq

    def begin(self) -> None:
        """Read the state just before a timed run."""
        self._start = self.read()

    def end(self) -> Optional[dict[str, Any]]:
        """Read the state just after the run; the run's entry (None without `begin()`)."""
        start = self._start
        if start is None:
            return None
        began = time.perf_counter()
        cpus = tuple(start.ticks) or ((start.cpu,) if start.cpu is not None else ())
        end = self.read(cpus)
        entry = self._entry(start, end)
        entry["read_us"] = (time.perf_counter() - began) * 1e6
        self._start = None
        return entry

    def _entry(self, start: ThreadReading, end: ThreadReading) -> dict[str, Any]:
        tick_ms = 1e3 / os.sysconf("SC_CLK_TCK")
        entry: dict[str, Any] = {
            "cpu_start": start.cpu, "cpu_end": end.cpu,
            "migrations": (end.migrations - start.migrations
                           if start.migrations is not None and end.migrations is not None
                           else None),
            "voluntary_switches": end.voluntary - start.voluntary,
            "waited_ms": (end.run_delay_ns - start.run_delay_ns) / 1e6
            if start.run_delay_ns is not None and end.run_delay_ns is not None else None,
            "involuntary_switches": end.involuntary - start.involuntary,
            "minor_faults": end.minor_faults - start.minor_faults,
            "major_faults": end.major_faults - start.major_faults,
            "freq_mhz": start.freq_mhz,
            "numa_node": self._topology_of(start.cpu)[1] if start.cpu is not None else None,
            "gpu_sm_mhz_start": start.sm_mhz, "gpu_sm_mhz_end": end.sm_mhz,
        }
        if start.cpu is not None and start.cpu in start.ticks and start.cpu in end.ticks:
            entry["steal_ms"] = (end.ticks[start.cpu][0] - start.ticks[start.cpu][0]) * tick_ms
            siblings = [cpu for cpu in start.ticks if cpu != start.cpu and cpu in end.ticks]
            entry["sibling_busy_ms"] = (sum(end.ticks[cpu][1] - start.ticks[cpu][1]
                                            for cpu in siblings) * tick_ms
                                        if siblings else None)
        if self.card is not None:
            entry["gpu_pstate"] = self.card.performance_state()
        return entry
