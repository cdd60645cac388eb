"""child/host_state.py: the timing thread's state read around a timed run, on this host."""

import mmap
import os

from child.host_state import (HostStateWatch, read_cpu_ticks, read_migrations,
                              read_run_delay_ns)
from core.host.host_state import COLUMNS

PROC_STAT = """cpu  100 0 50 1000 5 0 0 40 0 0
cpu0 60 0 30 500 5 0 0 30 0 0
cpu1 40 0 20 500 0 0 0 10 0 0
intr 12345 0 0
"""


def test_proc_stat_gives_each_cpus_steal_and_busy_ticks(tmp_path):
    path = tmp_path / "stat"
    path.write_text(PROC_STAT)
    # busy: every column but idle and iowait (steal included)
    assert read_cpu_ticks((1, 0), str(path)) == {1: (10, 70), 0: (30, 120)}
    assert read_cpu_ticks((7,), str(path)) == {}
    assert read_cpu_ticks((0,), str(tmp_path / "none")) == {}


def test_the_sched_files_give_migrations_and_waits_or_none(tmp_path):
    sched = tmp_path / "sched"
    sched.write_text("python (1, #threads: 1)\n---\nse.exec_start : 1.0\n"
                     "se.nr_migrations                             :                   17\n"
                     "nr_switches : 4\n")
    assert read_migrations(str(sched)) == 17
    sched.write_text("nr_switches : 4\n")
    assert read_migrations(str(sched)) is None
    assert read_migrations(str(tmp_path / "none")) is None
    schedstat = tmp_path / "schedstat"
    schedstat.write_text("188390 2500000 3\n")
    assert read_run_delay_ns(str(schedstat)) == 2500000


class FakeCard:
    def __init__(self):
        self.clocks = iter([1980, 1755])

    def sm_clock_mhz(self):
        return next(self.clocks)

    def performance_state(self):
        return 0


def test_a_window_reads_this_thread_and_its_cpu():
    watch = HostStateWatch(FakeCard(), siblings=lambda cpu: (cpu,))
    watch.begin()
    # Page faults of this thread: a fresh mapping's pages, each touched once (bytearrays could
    # come from memory the allocator had already touched, and fault nothing).
    pages = mmap.mmap(-1, 256 * mmap.PAGESIZE)
    for offset in range(0, len(pages), mmap.PAGESIZE):
        pages[offset] = 1
    entry = watch.end()
    assert set(entry) <= set(COLUMNS)
    assert entry["cpu_start"] in os.sched_getaffinity(0)
    assert entry["cpu_end"] in os.sched_getaffinity(0)
    assert entry["minor_faults"] > 0
    assert entry["involuntary_switches"] >= 0 and entry["voluntary_switches"] >= 0
    assert entry["steal_ms"] is not None and entry["steal_ms"] >= 0
    assert entry["sibling_busy_ms"] is None  # no sibling but itself
    assert (entry["gpu_sm_mhz_start"], entry["gpu_sm_mhz_end"], entry["gpu_pstate"]) == (
        1980, 1755, 0)
    assert entry["read_us"] > 0
    assert watch.end() is None  # no begin(): no window
