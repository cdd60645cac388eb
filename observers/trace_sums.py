"""What a torch.profiler Chrome trace ran, summed: device kernels, copies, host operators,
CUDA-graph launches and the host's time, over the whole trace or per marked iteration (pure:
no torch).

The child sums each timed iteration's kernels this way for the device's busy time
(child/device_busy.py), and benchmarks/fidelity/kernel_parity.py compares the two tools' traces with
the same sums, so that both read a trace alike.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

#: Chrome-trace categories of host-side events and of device-side ones (torch.profiler's).
HOST_CATEGORIES = frozenset({"cpu_op", "cuda_runtime", "cuda_driver", "user_annotation",
                             "python_function", "cpu_instant_event"})
KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"
USER_ANNOTATION = "user_annotation"
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})


@dataclass
class Tally:
    """Per name: how many events and their summed duration (microseconds)."""

    counts: Counter = field(default_factory=Counter)
    time_us: Counter = field(default_factory=Counter)

    def add(self, name: str, duration: float) -> None:
        self.counts[name] += 1
        self.time_us[name] += duration

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    @property
    def total_us(self) -> float:
        return float(sum(self.time_us.values()))

    def count_of(self, names: list[str]) -> int:
        return sum(self.counts[name] for name in names)


@dataclass
class TraceSummary:
    """What one profiled iteration ran."""

    kernels: Tally = field(default_factory=Tally)
    memcpy: Tally = field(default_factory=Tally)
    memset: Tally = field(default_factory=Tally)
    operators: Tally = field(default_factory=Tally)
    graph_launches: int = 0
    host_us: float = 0.0
    #: Per kernel name, how many launches had each shape ("grid [x, y, z] block [x, y, z]",
    #: where the trace gives them): a kernel whose tuning picked another configuration
    #: keeps its name and launches with another shape.
    shapes: dict[str, Counter] = field(default_factory=dict)


def launch_shape(event: dict[str, Any]) -> Optional[str]:
    """A kernel event's grid and block as text, or None where the trace holds neither."""
    args = event.get("args") or {}
    grid, block = args.get("grid"), args.get("block")
    if grid is None and block is None:
        return None
    return f"grid {grid} block {block}"


def trace_events(trace: Any) -> list[dict[str, Any]]:
    """The complete events of a Chrome trace (a dict with traceEvents, or a bare list)."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    return [event for event in events if isinstance(event, dict) and event.get("ph") == "X"]


def _number(event: dict[str, Any], key: str) -> float:
    return float(event.get(key, 0) or 0)


def summarize(trace: Any) -> TraceSummary:
    """A Chrome trace of torch.profiler as a TraceSummary."""
    summary = TraceSummary()
    first, last = None, None
    for event in trace_events(trace):
        category, name = event.get("cat", ""), str(event.get("name", ""))
        duration = _number(event, "dur")
        if category == KERNEL:
            summary.kernels.add(name, duration)
            shape = launch_shape(event)
            if shape is not None:
                summary.shapes.setdefault(name, Counter())[shape] += 1
        elif category == MEMCPY:
            summary.memcpy.add(name, duration)
        elif category == MEMSET:
            summary.memset.add(name, duration)
        elif category in HOST_CATEGORIES:
            start = _number(event, "ts")
            first = start if first is None else min(first, start)
            last = start + duration if last is None else max(last, start + duration)
            if category == "cpu_op":
                summary.operators.add(name, duration)
            if name in GRAPH_LAUNCHES:
                summary.graph_launches += 1
    if first is not None and last is not None:
        summary.host_us = last - first
    return summary


def _digest(counts: Counter) -> str:
    text = "\n".join(f"{key}\t{count}" for key, count in sorted(counts.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def kernel_digests(trace: Any, mark: str) -> Optional[dict[str, Any]]:
    """What the first marked iteration launched, as two digests: `kernels` of the kernels'
    names and counts, `launches` of their names, grids and blocks. Two compiles of one graph
    give the same `kernels`; their `launches` differ where the tuning kept another
    configuration for a kernel. None where that iteration launched no kernel with a shape."""
    events = trace_events(trace)
    marks = sorted(_number(event, "ts") for event in events
                   if event.get("cat") == USER_ANNOTATION
                   and str(event.get("name", "")).startswith(mark)
                   and str(event["name"])[len(mark):].isdigit())
    if not marks:
        return None
    start, end = marks[0], (marks[1] if len(marks) > 1 else float("inf"))
    names, launches = Counter(), Counter()
    for event in events:
        if event.get("cat") != KERNEL or not start <= _number(event, "ts") < end:
            continue
        shape = launch_shape(event)
        if shape is None:
            continue
        name = str(event.get("name", ""))
        names[name] += 1
        launches[f"{name} {shape}"] += 1
    if not launches:
        return None
    return {"kernels": _digest(names), "launches": _digest(launches),
            "count": sum(names.values())}


def iteration_tallies(trace: Any, mark: str, categories: Iterable[str] = (KERNEL,),
                      names: Optional[frozenset[str]] = None) -> list[Tally]:
    """Per marked iteration (in the order they ran), the events of `categories` (of `names` only, where given) that
    started in it.

    An iteration is marked by a host annotation named `mark` followed by its number
    (`torch.profiler.record_function`), and ends with a synchronization inside its
    annotation, so its device work starts after the annotation starts and before the next
    one does: each event counts for the last iteration that started before it (the trace
    puts device and host times on one clock). Events before the first mark count nowhere."""
    events = trace_events(trace)
    marks = sorted((_number(event, "ts"), int(str(event["name"])[len(mark):]))
                   for event in events
                   if event.get("cat") == USER_ANNOTATION
                   and str(event.get("name", "")).startswith(mark)
                   and str(event["name"])[len(mark):].isdigit())
    starts = [start for start, _ in marks]
    tallies = [Tally() for _ in marks]
    wanted = frozenset(categories)
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") not in wanted or (names is not None and name not in names):
            continue
        at = bisect.bisect_right(starts, _number(event, "ts")) - 1
        if at >= 0:
            tallies[at].add(name, _number(event, "dur"))
    return tallies
