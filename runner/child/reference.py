"""A short fixed reference workload, timed before and after the timed runs (child side).

It tells a slow period of the machine from a slow model: the same two pieces of work on the
experiment's device, every time, whatever the model:

- the launch loop: `LAUNCHES` tiny operations queued by the host (torch's dispatcher and, on
  CUDA, kernel launches), then one synchronization: microseconds per launch, the host-side
  speed that launch-bound models follow;
- the kernel: `PRODUCTS` matrix products of a fixed size on the device, synchronized:
  milliseconds per product (on the CPU with the experiment's threads; the usual figures
  are kept per thread count).

Each is the median of `REPEATS` tries of about 10 ms on a quiet CPU: longer than the
scheduler's time slices, so that other processes' load on the cores slows a try (a try of a
millisecond or two fits in one slice and does not see it). A reading costs about 60 ms on a
quiet CPU, and is taken twice per process. The parent compares them with this host's usual figures
(runner/run/slow_periods.py).

A third figure is read *during* the timed runs, not around them: after each timed run, the
host pulse, a fixed pure-Python loop on the process's main thread (`PULSE_LOOPS` additions,
about a millisecond). On the lent GPU hosts a core's single-thread speed moved by up to 2x
from one second to the next (another tenant's load on the physical core), faster than a
reading before and after a process can follow; the pulses' median is the speed the host ran
at while the model was timed.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Optional

LAUNCHES = 2000
PRODUCTS = 16
REPEATS = 3
#: The matrix product's size per device type (and its dtype): a fraction of a millisecond.
KERNEL_SIZES = {"cpu": (256, "float32"), "cuda": (4096, "float16")}
#: The host pulse's additions: about a millisecond on a current server core.
PULSE_LOOPS = 20000


def _median_seconds(work: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        work()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_reference(device_type: str, repeats: int = REPEATS) -> Optional[dict[str, Any]]:
    """The reference figures on `device_type` ('cpu' or 'cuda'), or None where there is no
    reference (another device type, or CUDA that this process has not started: an XLA or
    JAX stack owns the card)."""
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
    figures = _measure(torch, device, sync, size, dtype, repeats)
    if device_type == "cpu":
        figures["threads"] = torch.get_num_threads()
    return figures


def _measure(torch, device, sync, size: int, dtype: str, repeats: int) -> dict[str, Any]:
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

        launches(), kernel()  # first calls pay one-time costs
        launch = _median_seconds(launches, sync, repeats) / LAUNCHES
        product = _median_seconds(kernel, sync, repeats) / PRODUCTS
    return {"launch_us": launch * 1e6, "kernel_ms": product * 1e3, "device": device.type,
            "kernel": f"mm {size}x{size} {dtype}", "launches": LAUNCHES, "products": PRODUCTS}


def host_pulse(loops: int = PULSE_LOOPS) -> float:
    """Milliseconds the main thread takes for `loops` fixed Python additions: the host's
    single-thread speed at this moment, whatever the device."""
    start = time.perf_counter()
    total = 0
    for step in range(loops):
        total += step
    return (time.perf_counter() - start) * 1e3


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
