"""What says a child killed by SIGKILL ran out of memory (and nothing else guesses it), and
what says an experiment ran out of its GPU's memory.

A SIGKILL alone does not say who sent it: the kernel's out-of-memory killer, a person, a
cluster's scheduler, a dying parent. A line calls it out of memory only where one of these
saw it:
- the kernel's log (`/dev/kmsg`, where readable) names the child's pid as killed for memory
  after the child started;
- the out-of-memory kill counter of the runner's cgroup (v2 `memory.events`, `oom_kill`)
  went up while the child ran;
- the memory watch saw the machine nearly out of memory at its last look before the end.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import psutil

KMSG = Path("/dev/kmsg")
#: At most this many kernel log records are read per look.
MAX_KMSG_RECORDS = 20000
#: Memory available below this share of the machine counts as nearly out of memory.
LOW_MEMORY_SHARE = 0.03
#: What PyTorch, the CUDA libraries and XLA raise when a GPU's memory runs out.
GPU_OUT_OF_MEMORY = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED"
    r"|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory")


def cgroup_oom_kills() -> Optional[int]:
    """The `oom_kill` count of this process's cgroup (v2), None where there is none."""
    try:
        for entry in Path("/proc/self/cgroup").read_text().splitlines():
            if entry.startswith("0::"):
                events = Path("/sys/fs/cgroup") / entry[3:].lstrip("/") / "memory.events"
                for line in events.read_text().splitlines():
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
    except (OSError, ValueError):
        return None
    return None


def kernel_says_killed_for_memory(pid: int, since_monotonic: float) -> bool:
    """Whether the kernel's log says the OOM killer killed `pid` after `since_monotonic`
    (CLOCK_MONOTONIC seconds). False where the log cannot be read."""
    pattern = re.compile(rf"(Killed process {pid}\b|oom-kill:.*\bpid={pid}\b)")
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        for _ in range(MAX_KMSG_RECORDS):
            try:
                record = os.read(fd, 8192).decode("utf-8", "replace")
            except BlockingIOError:
                return False
            except OSError:  # EPIPE: records overwritten meanwhile; go on
                continue
            if not record:
                return False
            header, _, message = record.partition(";")
            fields = header.split(",")
            try:
                stamp = int(fields[2]) / 1e6
            except (IndexError, ValueError):
                continue
            if stamp >= since_monotonic - 1 and pattern.search(message):
                return True
        return False
    finally:
        os.close(fd)


@dataclass
class MemoryWatch:
    """What the runner saw of memory while one child ran."""

    started_monotonic: float
    oom_kills_at_start: Optional[int]
    #: The machine's available memory at the watch's last look (bytes), and its total.
    last_available: Optional[int] = None
    total: int = 0

    @classmethod
    def start(cls, now_monotonic: float) -> "MemoryWatch":
        return cls(now_monotonic, cgroup_oom_kills())

    def look(self) -> None:
        memory = psutil.virtual_memory()
        self.last_available, self.total = memory.available, memory.total

    def out_of_memory(self, pid: int) -> Optional[str]:
        """What says child `pid`, killed by SIGKILL, ran out of memory; None if nothing."""
        if kernel_says_killed_for_memory(pid, self.started_monotonic):
            return "the kernel's log says its out-of-memory killer killed it"
        kills = cgroup_oom_kills()
        if kills is not None and self.oom_kills_at_start is not None \
                and kills > self.oom_kills_at_start:
            return (f"the cgroup counted {kills - self.oom_kills_at_start} out-of-memory "
                    "kill(s) while it ran")
        if self.last_available is not None and self.total \
                and self.last_available < LOW_MEMORY_SHARE * self.total:
            return (f"the memory watch saw {self.last_available / 2**20:.0f} MiB of "
                    f"{self.total / 2**20:.0f} MiB available just before")
        return None


def gpu_memory_ran_out(*texts: Optional[str]) -> bool:
    """Whether any of `texts` (a line's error, its verification's reason) says a GPU ran out
    of memory."""
    return any(text and GPU_OUT_OF_MEMORY.search(text) for text in texts)
