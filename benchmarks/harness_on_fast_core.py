"""Run one of PyTorch's harness scripts with its launching thread on the host's fastest core.

    python benchmarks/harness_on_fast_core.py HARNESS_DIR/huggingface.py --performance ...

The harness's code runs unchanged; only where its main thread runs changes. Before each of the
harness's timed runs (its `common.timed`, which every eager and compiled timing goes through),
the main thread is pinned to the core of the process's CPU set where a host pulse runs fastest,
with the same picker as our runner's `--timing-core=fastest` (runner/child/reference.py). Why:
on hosts whose cores run at two speeds that change within seconds (docs/timing.md, "Slow
periods"), a launch-bound model's figure is otherwise the speed of whichever core the scheduler
gave the harness at that moment, a draw that no comparison of two tools can share. Pinning both
tools' launching threads to the fast state compares them as a quiet host, like the dashboard's,
would. Only the calling thread is pinned (Linux's `sched_setaffinity` on thread 0): processes
and threads started earlier, such as inductor's compile workers, keep their CPUs.
"""

from __future__ import annotations

import atexit
import functools
import os
import runpy
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_picker():
    """Our runner's core picker over this process's CPUs, imported without leaving the project
    on the harness's import path (its folder has modules of its own)."""
    sys.path.insert(0, str(ROOT))
    try:
        from runner.child.reference import CorePicker
    finally:
        sys.path.remove(str(ROOT))
    return CorePicker(tuple(sorted(os.sched_getaffinity(0))))


def pin_before_timed_runs(common, picker) -> None:
    """Wrap the harness's `common.timed` so that each timed run starts on the fastest core."""
    timed = common.timed

    @functools.wraps(timed)
    def timed_on_fastest_core(*args, **kwargs):
        picker.pick()
        return timed(*args, **kwargs)

    common.timed = timed_on_fastest_core


def picks_summary(picker) -> str:
    """One line on the picks made: how many, the picked cores' pulses against the scans'."""
    if not picker.picks:
        return "harness_on_fast_core: no timed run was made"
    picked = statistics.median(pick["pulse_ms"] for pick in picker.picks)
    scanned = statistics.median(pick["scan_median_ms"] for pick in picker.picks)
    return (f"harness_on_fast_core: {len(picker.picks)} timed runs started on the fastest of "
            f"{len(picker.cores)} cores; host pulse median {picked:.3f} ms on the picked core, "
            f"{scanned:.3f} ms over the scanned ones")


def main(argv: list[str]) -> int:
    if not argv or not argv[0].endswith(".py"):
        print("usage: harness_on_fast_core.py HARNESS_SCRIPT.py [its arguments]", file=sys.stderr)
        return 2
    script = Path(argv[0]).resolve()
    if not script.is_file():
        print(f"no harness script at {argv[0]}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(script.parent))
    picker = load_picker()
    import common  # the harness's own, from its folder; its scripts import this same module

    pin_before_timed_runs(common, picker)
    atexit.register(lambda: print(picks_summary(picker), file=sys.stderr))
    sys.argv = [str(script), *argv[1:]]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
