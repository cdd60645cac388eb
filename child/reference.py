"""A short fixed reference workload, timed before and after the timed runs (child side).

It tells a slow period of the machine from a slow model: the same two pieces of work on the
experiment's device, every time, whatever the model:

- the launch loop: `LAUNCHES` tiny operations queued by the host (torch's dispatcher and, on
  CUDA, kernel launches), then one synchronization: microseconds per launch, the host-side
  speed that launch-bound models follow;
- the kernel: `PRODUCTS` matrix products of a fixed size on the device, synchronized:
  milliseconds per product (on the CPU with the experiment's threads; the usual figures
  are kept per thread count).

Each is the median of a few tries of about 10 ms on a quiet CPU: longer than the
scheduler's time slices, so that other processes' load on the cores slows a try (a try of a
millisecond or two fits in one slice and does not see it). The reading's cost scales with
the timed runs it guards: the one before them makes one try of each (after a single call of
each operation, which pays the one-time costs); the one after makes as many as
`REFERENCE_SHARE` of the process's timed runs (its warm-up and compiling left out) pays
for, up to `REPEATS` (a try of both pieces costs about 20 ms on a quiet CPU, and many times
that on loaded cores, where a thread pool waits at each barrier), and none where that share
pays for less than one try: timed runs of a fraction of a second are guarded by the reading
made just before them and by the host pulses during them. Each reading says how many tries
it took (`tries`). The parent compares them with this host's usual figures
(runner/run/record/slow_periods.py), taking for each figure the lesser of the two readings.

A third figure is read *during* the timed runs, not around them: after each timed run, the
host pulse, a fixed pure-Python loop on the process's main thread (`PULSE_LOOPS` additions,
about a millisecond). On the lent GPU hosts a core's single-thread speed moved by up to 2x
from one second to the next (another tenant's load on the physical core), faster than a
reading before and after a process can follow; the pulses' median is the speed the host ran
at while the model was timed.

On CUDA the timing thread is also pinned, just before the timed runs, to the core of the
child's set where a pulse ran fastest (`CorePicker`; --timing-core), and moved again when a
pulse after a timed run reads `REPICK_RATIO` times slower than the pick: a launch-bound model
then runs at the host's fast speed wherever the host offers one, instead of at whichever
speed the scheduler's core had.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from core.host.host_state import PULSE_LOOPS, host_pulse

LAUNCHES = 2000
PRODUCTS = 16
REPEATS = 3
#: The share of a process's timed runs (warm-up left out) that the reading after them may take.
REFERENCE_SHARE = 0.1
#: The matrix product's size per device type (and its dtype): a fraction of a millisecond.
KERNEL_SIZES = {"cpu": (256, "float32"), "cuda": (4096, "float16")}
#: Pulses per core when picking the timing thread's core (the best of them counts: the
#: first after a move pays for cold caches).
PICK_ROUNDS = 2
#: A pulse this many times slower than the picked core's reading moves the thread again.
REPICK_RATIO = 1.3


def _median_seconds(work: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        work()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tries_for(guarded_seconds: float, try_seconds: Optional[float]) -> int:
    """The tries a reading after `guarded_seconds` of measuring may take: as many as
    REFERENCE_SHARE of that time pays for at `try_seconds` a try, up to REPEATS; none where
    it pays for less than one (one where no try's cost is known: no reading before)."""
    if not try_seconds or try_seconds <= 0:
        return 1
    return max(0, min(REPEATS, int(REFERENCE_SHARE * guarded_seconds / try_seconds)))


def measure_reference(device_type: str, repeats: int = REPEATS,
                      warm: bool = True) -> Optional[dict[str, Any]]:
    """The reference figures on `device_type` ('cpu' or 'cuda') over `repeats` tries, or
    None where there is no reference (another device type, or CUDA that this process has not
    started: an XLA or JAX stack owns the card). `warm`: call each operation once first, to
    pay its one-time costs (not needed again in the same process)."""
    import torch

    if device_type not in KERNEL_SIZES:
        return None
    if device_type == "cuda" and not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    device = torch.device(device_type)
    sync = (lambda: torch.cuda.synchronize(device)) if device_type == "cuda" else (lambda: None)
    size, dtype = KERNEL_SIZES[device_type]
    # The experiment's own threads (the child set them): a multi-threaded product suffers
    # from load on its cores far more than one thread does (a thread pool waits at each
    # barrier for a thread another process holds off its core), as the experiment does.
    figures = _measure(torch, device, sync, size, dtype, repeats, warm)
    if device_type == "cpu":
        figures["threads"] = torch.get_num_threads()
    return figures


def _measure(torch, device, sync, size: int, dtype: str, repeats: int,
             warm: bool = True) -> dict[str, Any]:
    with torch.no_grad():
        small = torch.zeros(16, device=device)
        left = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))
        right = torch.randn(size, size, device=device, dtype=getattr(torch, dtype))

        def launches() -> None:
            value = small
            for _ in range(LAUNCHES):
                value = value.add(1.0)

        def kernel() -> None:
            for _ in range(PRODUCTS):
                torch.mm(left, right)

        if warm:  # a first call of each pays its one-time costs (allocation, thread pool)
            small.add(1.0), torch.mm(left, right)
            sync()
        launch = _median_seconds(launches, sync, repeats) / LAUNCHES
        product = _median_seconds(kernel, sync, repeats) / PRODUCTS
    return {"launch_us": launch * 1e6, "kernel_ms": product * 1e3, "device": device.type,
            "kernel": f"mm {size}x{size} {dtype}", "launches": LAUNCHES, "products": PRODUCTS,
            "tries": repeats, "try_s": launch * LAUNCHES + product * PRODUCTS}


def pulse_reading(pulses: list[float], around: Optional[dict[str, Any]],
                  device_type: str) -> Optional[dict[str, Any]]:
    """The reading made of a process's host pulses (`host_ms`, their median), keyed like the
    readings `around` it (device and threads), so that one history keeps them; None without
    pulses."""
    if not pulses:
        return None
    reading: dict[str, Any] = {"host_ms": statistics.median(pulses), "pulses_ms": list(pulses),
                               "loops": PULSE_LOOPS, "device": device_type}
    for name in ("device", "threads"):
        if around and around.get(name) is not None:
            reading[name] = around[name]
    return reading


def _pin_this_thread(cores: Sequence[int]) -> None:
    # pid 0 is the calling thread on Linux: torch's and CUDA's other threads keep their cores.
    os.sched_setaffinity(0, set(cores))


#: The name torch gives autograd's device threads ("pt_autograd_<device>"): on CUDA a
#: backward pass's kernels are launched from them, not from the thread that calls backward.
AUTOGRAD_THREAD_PREFIX = "pt_autograd_"


def autograd_threads() -> list[int]:
    """The thread ids of this process's autograd device threads (Linux: /proc/self/task;
    none elsewhere, or before a first backward pass on a device made them)."""
    found = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as file:
                name = file.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith(AUTOGRAD_THREAD_PREFIX):
            found.append(int(task))
    return found


def _pin_thread(thread: int, cores: Sequence[int]) -> None:
    try:
        os.sched_setaffinity(thread, set(cores))
    except OSError:  # the thread ended meanwhile
        pass


@dataclass
class CorePicker:
    """Pins the calling thread to the core of `cores` where the host pulse runs fastest, and
    moves it when a later pulse says that core slowed down; `release` gives it `cores` back.
    The threads that launch work on the calling thread's behalf (`companions`: autograd's
    device threads, which launch a backward pass's kernels while the calling thread waits)
    go with it to each pick and back at `release`. `picks` records each pick: the core, its
    pulse, the scan's median pulse (ms) and how many companions went with it."""

    cores: tuple[int, ...]
    pulse: Callable[[], float] = host_pulse
    pin: Callable[[Sequence[int]], None] = _pin_this_thread
    rounds: int = PICK_ROUNDS
    picks: list[dict[str, Any]] = field(default_factory=list)
    companions: Callable[[], list[int]] = autograd_threads
    pin_companion: Callable[[int, Sequence[int]], None] = _pin_thread

    def pick(self) -> int:
        """Scan the cores, stay on the fastest (with the companions); returns it."""
        readings = {}
        for core in self.cores:
            self.pin((core,))
            readings[core] = min(self.pulse() for _ in range(self.rounds))
        core = min(readings, key=readings.__getitem__)
        self.pin((core,))
        companions = self.companions()
        for thread in companions:
            self.pin_companion(thread, (core,))
        self.picks.append({"core": core, "pulse_ms": readings[core],
                           "scan_median_ms": statistics.median(readings.values()),
                           "companions": len(companions)})
        return core

    def slowed(self, pulse_ms: float) -> bool:
        """Whether a pulse read on the picked core says that core slowed down."""
        return bool(self.picks) and pulse_ms > REPICK_RATIO * self.picks[-1]["pulse_ms"]

    def follow(self, pulse_ms: float) -> None:
        """A pulse read on the picked core: pick again when it is slow."""
        if self.slowed(pulse_ms):
            self.pick()

    def release(self) -> None:
        self.pin(self.cores)
        for thread in self.companions():
            self.pin_companion(thread, self.cores)

    def record(self) -> dict[str, Any]:
        """What the line keeps: the picks, in order."""
        return {"candidates": len(self.cores), "picks": list(self.picks)}
