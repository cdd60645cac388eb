"""How fast is each logical CPU of this host, right now? A map for telling a slow host apart.

For every CPU this process may use, pinned to it in turn (three rounds, each in its own
shuffled order), it times the children's host pulse (child/reference.py) at 100,000
additions and, with `--cuda N`,
1,000 tiny launches on CUDA device N then a synchronization. It prints each CPU's median of
the rounds, the share of readings within `--fast-within` times the map's fastest reading (the
host's fast state, where the loop's times fall into two groups), and how often one CPU's three rounds agreed on its state:
a share that moves between maps, or CPUs that change state between rounds, tell a host whose
single-thread speed is not its own (docs/timing.md, "Slow periods").

    python -m benchmarks.host_cpu_map [--cuda 0] [--json map.json] [--fast-within 1.4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from typing import Any, Callable, Optional


from api import host_pulse  # (the child's pulse, longer)

LOOP = 100_000
LAUNCHES = 1_000
ROUNDS = 3


def launch_timer(device: int) -> Callable[[], float]:
    """Microseconds per tiny launch on CUDA device `device`, synchronized."""
    import torch

    target = torch.device("cuda", device)
    value = torch.zeros(16, device=target)
    for _ in range(100):
        value.add_(1)
    torch.cuda.synchronize(target)

    def launch_us() -> float:
        start = time.perf_counter()
        for _ in range(LAUNCHES):
            value.add_(1)
        torch.cuda.synchronize(target)
        return (time.perf_counter() - start) / LAUNCHES * 1e6

    return launch_us


def cpu_map(cpus: list[int], launches: Optional[Callable[[], float]]) -> dict[int, list[dict[str, Any]]]:
    """Each CPU's readings, one per round."""
    readings: dict[int, list[dict[str, Any]]] = {cpu: [] for cpu in cpus}
    for round_index in range(ROUNDS):
        order = cpus[:]
        random.Random(round_index).shuffle(order)
        for cpu in order:
            os.sched_setaffinity(0, {cpu})
            time.sleep(0.002)  # let the scheduler move this thread there
            reading = {"python_ms": host_pulse(LOOP)}
            if launches is not None:
                reading["launch_us"] = launches()
            readings[cpu].append(reading)
    os.sched_setaffinity(0, set(cpus))
    return readings


def summarize(readings: dict[int, list[dict[str, Any]]], fast_within: float) -> dict[str, Any]:
    """The share of fast readings (within `fast_within` times the fastest one), and of CPUs
    whose rounds all agreed on their state."""
    fastest = min(each["python_ms"] for values in readings.values() for each in values)
    fast_below = fastest * fast_within
    states = {cpu: [each["python_ms"] < fast_below for each in values]
              for cpu, values in readings.items()}
    every = [state for values in states.values() for state in values]
    return {"fast_below_ms": fast_below, "fast_share": sum(every) / len(every),
            "steady_cpus": sum(len(set(values)) == 1 for values in states.values()) / len(states)}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", type=int, default=None, metavar="N",
                        help="also time tiny launches on CUDA device N")
    parser.add_argument("--fast-within", type=float, default=1.4, metavar="FACTOR",
                        help="a Python loop within this many times the map's fastest counts as "
                             "the fast state (1.4)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every reading here")
    args = parser.parse_args(argv)
    if not hasattr(os, "sched_setaffinity"):
        parser.error("this system cannot pin a process to a CPU")
    cpus = sorted(os.sched_getaffinity(0))
    readings = cpu_map(cpus, launch_timer(args.cuda) if args.cuda is not None else None)
    for cpu, values in readings.items():
        cells = [f"python {statistics.median(v['python_ms'] for v in values):6.2f} ms"]
        if args.cuda is not None:
            cells.append(f"launch {statistics.median(v['launch_us'] for v in values):5.1f} us")
        rounds = " ".join(f"{v['python_ms']:.1f}" for v in values)
        print(f"cpu {cpu:3d}  {'  '.join(cells)}  rounds {rounds}")
    summary = summarize(readings, args.fast_within)
    print(f"fast readings (python loop under {summary['fast_below_ms']:.2f} ms): "
          f"{summary['fast_share']:.0%}; "
          f"CPUs whose {ROUNDS} rounds agreed on their state: {summary['steady_cpus']:.0%}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"readings": readings, **summary}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
