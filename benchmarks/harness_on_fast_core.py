"""Run one of PyTorch's harness scripts with its launching thread on the host's fastest core.

    python -m benchmarks.harness_on_fast_core HARNESS_DIR/huggingface.py --performance ...

The harness's code runs unchanged; only where its main thread runs changes, as our runner's
`--timing-core=fastest` moves ours (child/timing.py), with the same picker
(child/reference.py): before the harness starts, the main thread is pinned to the core
of the process's CPU set where a host pulse runs fastest, so that inductor tunes its kernels
(at their first call, in the harness's warm-up) on a fast core, as ours does for its cold
start; with inductor as the backend, inductor's compile workers are started first, as inductor
starts them at its first compile, so that they keep every core of the set. At the harness's
first timed run (its `common.timed`, which every eager and compiled timing goes through) the
core is picked again; after each timed run a host pulse (about 0.6 ms) is read, and the thread
moves to a newly picked core only when that pulse reads slow. Ours also runs such a run
again; the harness keeps it, as it would anyway.

Why: on hosts whose cores run at two speeds that change within seconds (docs/timing.md, "Slow
periods"), a launch-bound model's figure is otherwise the speed of whichever core the scheduler
gave the harness at that moment, a draw that no comparison of two tools can share. Only the
calling thread is pinned (Linux's `sched_setaffinity` on thread 0): processes and threads
started earlier, such as inductor's compile workers, keep their CPUs.

Not a scan before every timed run: a scan of every core (about 20 ms, the card idle) before
each timed run of one iteration, and a move to another core just before it, changed the
harness's figures in both directions (docs/fidelity.md, "2. The same time").
"""

from __future__ import annotations

import atexit
import functools
import os
import runpy
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class FastCoreTimedRuns:
    """What the wrapper saw: the timed runs, and the host pulse read after each."""

    picker: Any
    pulse: Callable[[], float]
    runs: int = 0
    pulses_ms: list[float] = field(default_factory=list)

    def start(self) -> None:
        """Before the harness runs: on the fastest core for its warm-up and compile."""
        self.picker.pick()

    def before(self) -> None:
        if not self.runs:
            self.picker.pick()

    def after(self) -> None:
        self.runs += 1
        pulse_ms = self.pulse()
        self.pulses_ms.append(pulse_ms)
        self.picker.follow(pulse_ms)

    def summary(self) -> str:
        """One line: how many timed runs and picks, the pulses on the picked cores against
        the first scan's median."""
        if not self.runs:
            return "harness_on_fast_core: no timed run was made"
        first = self.picker.picks[0]
        return (f"harness_on_fast_core: {self.runs} timed runs, {len(self.picker.picks)} "
                f"picks of the fastest of {len(self.picker.cores)} cores; host pulse median "
                f"{statistics.median(self.pulses_ms):.3f} ms after the runs, "
                f"{first['scan_median_ms']:.3f} ms over the first scan's cores")


def compiles_with_inductor(argv: list[str]) -> bool:
    """Whether the harness's arguments choose inductor (`--inductor`, `--backend inductor`,
    `--backend=inductor`)."""
    if "--inductor" in argv or "--backend=inductor" in argv:
        return True
    return any(flag == "--backend" and value == "inductor"
               for flag, value in zip(argv, argv[1:]))


def load_timed_runs() -> tuple[FastCoreTimedRuns, Callable[[], None]]:
    """Our runner's core picker and host pulse over this process's CPUs, and our starter of
    inductor's compile workers, imported without leaving the project on the harness's import
    path (its folder has modules of its own)."""
    sys.path.insert(0, str(ROOT))
    try:
        from api import CorePicker, host_pulse, start_inductor_compile_workers
    finally:
        sys.path.remove(str(ROOT))
    watched = FastCoreTimedRuns(CorePicker(tuple(sorted(os.sched_getaffinity(0)))), host_pulse)
    return watched, start_inductor_compile_workers


def pin_timed_runs(common, watched: FastCoreTimedRuns) -> None:
    """Wrap the harness's `common.timed`: on the fastest core from its first call, a pulse
    after each call."""
    timed = common.timed

    @functools.wraps(timed)
    def timed_on_fastest_core(*args, **kwargs):
        watched.before()
        result = timed(*args, **kwargs)
        watched.after()
        return result

    common.timed = timed_on_fastest_core


def main(argv: list[str]) -> int:
    if not argv or not argv[0].endswith(".py"):
        print("usage: harness_on_fast_core.py HARNESS_SCRIPT.py [its arguments]", file=sys.stderr)
        return 2
    script = Path(argv[0]).resolve()
    if not script.is_file():
        print(f"no harness script at {argv[0]}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(script.parent))
    watched, start_compile_workers = load_timed_runs()
    import common  # the harness's own, from its folder; its scripts import this same module

    pin_timed_runs(common, watched)
    if compiles_with_inductor(argv[1:]):
        start_compile_workers()
    watched.start()
    atexit.register(lambda: print(watched.summary(), file=sys.stderr))
    sys.argv = [str(script), *argv[1:]]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
