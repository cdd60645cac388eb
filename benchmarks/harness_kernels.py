"""Run one of PyTorch's harness scripts and profile one eager and one compiled iteration of it.

    python -m benchmarks.harness_kernels OUT_DIR HARNESS_DIR/timm_models.py --performance ...

The harness runs unchanged (benchmarks/harness_settings.py says how it is launched). Its
first timed call is its first eager run, its second its first compiled one (its
speedup_experiment interleaves them, eager first); at each, after the harness's own warm-up,
one more iteration of the function that call times (its model_iter_fn, under the same
compile stance) runs under torch.profiler, followed by a synchronization, as our runner's
profiled run does (--dump-pytorch-profiles with one iteration per run). The Chrome traces go
to OUT_DIR/eager.json and OUT_DIR/compiled.json; then the process ends (exit status 0).
benchmarks/kernel_parity.py reads them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.harness_settings import device_of, launcher_arguments, run_harness
    sys.path.pop(0)
else:
    from benchmarks.harness_settings import device_of, launcher_arguments, run_harness

KINDS = ("eager", "compiled")


def profile_iteration(model: Any, model_iter_fn: Any, inputs: Any, device: str, path: Path
                      ) -> None:
    """One iteration of `model_iter_fn` and a synchronization under torch.profiler, its
    Chrome trace written to `path`."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiler:
        model_iter_fn(model, inputs, collect_outputs=False)
        if device == "cuda":
            torch.cuda.synchronize()
    profiler.export_chrome_trace(str(path))


def profile_first_timed_calls(common: Any, out: Path, device: str) -> None:
    """Wrap `common.timed`: its first two calls (eager, then compiled) each profile one
    iteration first; after the second the process ends."""
    timed = common.timed
    calls: list[str] = []

    @functools.wraps(timed)
    def timed_with_profile(model, model_iter_fn, example_inputs, *args, **kwargs):
        kind = KINDS[len(calls)]
        calls.append(kind)
        profile_iteration(model, model_iter_fn, example_inputs, device, out / f"{kind}.json")
        if len(calls) == len(KINDS):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        return timed(model, model_iter_fn, example_inputs, *args, **kwargs)

    common.timed = timed_with_profile


def main(argv: list[str]) -> int:
    parsed = launcher_arguments(argv, "harness_kernels.py OUT_DIR HARNESS_SCRIPT.py [its arguments]")
    if parsed is None:
        return 2
    out, _, script, arguments = parsed
    out.mkdir(parents=True, exist_ok=True)
    run_harness(script, arguments,
                lambda common: profile_first_timed_calls(common, out, device_of(arguments)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
