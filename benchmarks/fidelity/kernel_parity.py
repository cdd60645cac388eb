"""What runs on the card in one iteration of a case, in PyTorch's harness and in ours: the differences.

    python -m benchmarks.fidelity.kernel_parity --case "SUITE MODEL BATCH PRECISION MODE TEST"
        [--device cuda] [--reference DIR] [--keep DIR] [--top N]
    python -m benchmarks.fidelity.kernel_parity --traces HARNESS_TRACE.json OUR_TRACE.json [--top N]

For the case (a line of benchmarks/fidelity/fidelity.sh's cases file), each tool profiles one eager
and one compiled (inductor, the case's mode) iteration with torch.profiler, after its own
warm-up, followed by a synchronization:

- the harness (unchanged) through benchmarks/fidelity/harness_kernels.py, at its first eager and
  first compiled timed call;
- ours through its own profiled run (--dump-pytorch-profiles, one iteration per run), once
  with --dynamo=None (eager) and once with inductor.

From each Chrome trace it reads: every device kernel (name, count, summed device time, the
grid and block of each launch), memcpy and memset (count, time, by kind), CUDA-graph launches
(cudaGraphLaunch calls), the host operators (name, count) and the host time of the iteration
(from the first host event to the end of the last, the synchronization included). Then it
prints, for eager and for compiled, both tools' totals side by side and what differs: kernels
one side runs and the other not, count differences, the kernels whose summed time differs most
(--top, default 15), and the kernels both run alike but launch with other grids or blocks:
the same generated kernel tuned to another configuration (inductor times a kernel's candidate
configurations at its first launch, in every compile, so two compiles of one graph may run
the same kernels at different speeds). --traces compares two traces already made (one kind).
Its real use is on CUDA; on the CPU the traces hold host operators only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]

from benchmarks.fidelity.fidelity_cases import tool_flags
from benchmarks.fidelity.settings_parity import (SCRIPTS, TIMEOUT, Case, harness_name,
                                        last_line, tool_environment)
from benchmarks.fidelity.workload_parity import DEFAULT_REFERENCE
from api import Tally, TraceSummary
from api import summarize_trace as summarize

KINDS = ("eager", "compiled")
DEFAULT_TOP = 15


def totals_rows(theirs: TraceSummary, ours: TraceSummary) -> list[tuple[str, str, str]]:
    """(figure, harness, ours) for the totals."""
    def tally(t: Tally) -> str:
        return f"{t.count} / {t.total_us / 1e3:.3f} ms"

    return [("kernels (count / device time)", tally(theirs.kernels), tally(ours.kernels)),
            ("distinct kernels", str(len(theirs.kernels.counts)), str(len(ours.kernels.counts))),
            ("memcpy (count / time)", tally(theirs.memcpy), tally(ours.memcpy)),
            ("memset (count / time)", tally(theirs.memset), tally(ours.memset)),
            ("CUDA-graph launches", str(theirs.graph_launches), str(ours.graph_launches)),
            ("host operators", str(theirs.operators.count), str(ours.operators.count)),
            ("host time of the iteration", f"{theirs.host_us / 1e3:.3f} ms",
             f"{ours.host_us / 1e3:.3f} ms")]


def tally_differences(label: str, theirs: Tally, ours: Tally, top: int,
                      timed: bool = True) -> list[str]:
    """What differs between two tallies: names only one side has (by time, at most `top`
    each), count differences, and the `top` largest differences in summed time."""
    lines = []
    only_theirs = sorted(set(theirs.counts) - set(ours.counts), key=lambda n: -theirs.time_us[n])
    only_ours = sorted(set(ours.counts) - set(theirs.counts), key=lambda n: -ours.time_us[n])
    for side, names, tally in (("harness only", only_theirs, theirs), ("ours only", only_ours, ours)):
        if names:
            lines.append(f"{label}, {side}: {len(names)} names, {tally.count_of(names)} calls, "
                         f"{sum(tally.time_us[n] for n in names) / 1e3:.3f} ms")
            lines += [f"    {name} x{tally.counts[name]}"
                      + (f" {tally.time_us[name] / 1e3:.3f} ms" if timed else "")
                      for name in names[:top]]
    both = set(theirs.counts) & set(ours.counts)
    counted = sorted((n for n in both if theirs.counts[n] != ours.counts[n]),
                     key=lambda n: -abs(theirs.counts[n] - ours.counts[n]))
    if counted:
        lines.append(f"{label}, counts differ: {len(counted)} names")
        lines += [f"    {name}: x{theirs.counts[name]} vs x{ours.counts[name]}"
                  for name in counted[:top]]
    if timed:
        moved = sorted(both, key=lambda n: -abs(theirs.time_us[n] - ours.time_us[n]))[:top]
        moved = [n for n in moved if theirs.time_us[n] != ours.time_us[n]]
        if moved:
            lines.append(f"{label}, largest differences in summed time (harness vs ours)")
            lines += [f"    {name}: {theirs.time_us[name] / 1e3:.3f} vs "
                      f"{ours.time_us[name] / 1e3:.3f} ms" for name in moved]
    return lines


def shape_differences(theirs: TraceSummary, ours: TraceSummary, top: int) -> list[str]:
    """The kernels both sides run, the same number of times, but launched with other grids or
    blocks: the same generated kernel with another tuned configuration (inductor picks a
    kernel's configuration by timing its candidates at its first launch)."""
    both = [name for name in set(theirs.shapes) & set(ours.shapes)
            if theirs.kernels.counts[name] == ours.kernels.counts[name]
            and theirs.shapes[name] != ours.shapes[name]]
    if not both:
        return []
    both.sort(key=lambda n: -abs(theirs.kernels.time_us[n] - ours.kernels.time_us[n]))
    compared = sum(1 for name in set(theirs.shapes) & set(ours.shapes)
                   if theirs.kernels.counts[name] == ours.kernels.counts[name])

    def time_of(summary: TraceSummary) -> float:
        return sum(summary.kernels.time_us[name] for name in both) / 1e3

    def shapes(counter: Counter) -> str:
        return "; ".join(shape if count == 1 else f"{shape} x{count}"
                         for shape, count in sorted(counter.items()))

    lines = [f"kernels launched with other grids or blocks: {len(both)} of {compared} names "
             f"run alike, {time_of(theirs):.3f} vs {time_of(ours):.3f} ms (harness vs ours)"]
    for name in both[:top]:
        lines.append(f"    {name}: {theirs.kernels.time_us[name] / 1e3:.3f} vs "
                     f"{ours.kernels.time_us[name] / 1e3:.3f} ms, "
                     f"{shapes(theirs.shapes[name])} vs {shapes(ours.shapes[name])}")
    return lines


def differences(theirs: TraceSummary, ours: TraceSummary, top: int = DEFAULT_TOP) -> list[str]:
    """Every difference between two summaries, as lines of text."""
    lines = []
    for label, their_tally, our_tally, timed in (
            ("kernels", theirs.kernels, ours.kernels, True),
            ("memcpy", theirs.memcpy, ours.memcpy, True),
            ("memset", theirs.memset, ours.memset, True),
            ("host operators", theirs.operators, ours.operators, False)):
        lines += tally_differences(label, their_tally, our_tally, top, timed)
    lines += shape_differences(theirs, ours, top)
    if theirs.graph_launches != ours.graph_launches:
        lines.append(f"CUDA-graph launches: {theirs.graph_launches} vs {ours.graph_launches}")
    return lines


def print_comparison(kind: str, theirs: TraceSummary, ours: TraceSummary, top: int) -> None:
    print(f"\n== {kind}: harness vs ours")
    rows = totals_rows(theirs, ours)
    width = max(len(row[0]) for row in rows)
    for figure, their_value, our_value in rows:
        print(f"  {figure:<{width}}  {their_value:>24}  {our_value:>24}")
    found = differences(theirs, ours, top)
    print("  the same kernels, copies, CUDA-graph launches and operators" if not found
          else "\n".join(f"  {line}" for line in found))


# Making the traces.

def harness_traces(reference: Path, case: Case, device: str, folder: Path) -> dict[str, Path]:
    out = folder / "harness"
    command = [sys.executable, str(Path(__file__).with_name("harness_kernels.py")), str(out),
               str(reference / SCRIPTS[case.suite]), "--performance",
               *tool_flags("harness", case.precision, case.mode, case.test, case.batch),
               "--backend", "inductor", "--device", device, "--only", harness_name(reference, case),
               "--repeat", "1", "--output", str(folder / "harness.csv")]
    done = subprocess.run(command, cwd=reference, capture_output=True, text=True,
                          timeout=TIMEOUT, env=tool_environment())
    (folder / "harness.log").write_text(done.stdout + done.stderr)
    traces = {kind: out / f"{kind}.json" for kind in KINDS}
    missing = [kind for kind, path in traces.items() if not path.exists()]
    if missing:
        raise RuntimeError(f"the harness made no {' and '.join(missing)} trace (exit "
                           f"{done.returncode}): {last_line(done.stdout + done.stderr)}")
    return traces


def our_trace(case: Case, device: str, kind: str, folder: Path) -> Path:
    out = folder / f"ours-{kind}"
    dynamo = "--dynamo=None" if kind == "eager" else "--dynamo=inductor"
    command = [sys.executable, str(ROOT / "experiment_runner.py"), f"--suite-name={case.suite}",
               "-k", f"^{case.model}$", f"--accelerator={device}", "--xla=None", dynamo,
               *tool_flags("ours", case.precision, case.mode, case.test, case.batch),
               "--repeat=1", "--iterations-per-run=1", "--warmup=3", "--processes=1",
               "--dump-pytorch-profiles", "--no-progress", f"--output-dirname={out}"]
    if kind == "eager":
        command.remove(f"--mode={case.mode}")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
                          env=tool_environment())
    (folder / f"ours-{kind}.log").write_text(done.stdout + done.stderr)
    results = out / "results.jsonl"
    for text in reversed(results.read_text().splitlines() if results.exists() else []):
        line = json.loads(text)
        artifacts = line.get("artifacts") or {}
        if line.get("status") == "ok" and "time" in artifacts:
            trace = out / artifacts["time"] / "run-0" / "trace.json"
            if trace.exists():
                return trace
    raise RuntimeError(f"our runner made no {kind} trace (exit {done.returncode}): "
                       f"{last_line(done.stdout + done.stderr)}")


def load_summary(path: Path) -> TraceSummary:
    return summarize(json.loads(path.read_text()))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", help='"suite model batch precision mode test"')
    parser.add_argument("--traces", nargs=2, type=Path, metavar=("HARNESS", "OURS"),
                        help="compare two Chrome traces already made")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                        help="the harness's folder (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="keep the traces and logs here")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP,
                        help="names listed per kind of difference (default %(default)s)")
    options = parser.parse_args(argv)
    if options.traces:
        missing = [str(path) for path in options.traces if not path.is_file()]
        if missing:
            print(f"--traces: no file {', '.join(missing)}", file=sys.stderr)
            return 2
        print_comparison("trace", *(load_summary(path) for path in options.traces), options.top)
        return 0
    if not options.case:
        print("--case or --traces is needed", file=sys.stderr)
        return 2
    try:
        case = Case.parse(options.case)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    reference = options.reference.resolve()
    if not (reference / "common.py").exists():
        print(f"--reference {options.reference}: no harness (common.py) there", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kernel-parity-") as scratch:
        folder = options.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            theirs = harness_traces(reference, case, options.device, folder)
            ours = {kind: our_trace(case, options.device, kind, folder) for kind in KINDS}
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as error:
            print(f"{case}: {error}", file=sys.stderr)
            return 1
        print(f"{case} on {options.device}: one iteration of each, after each tool's warm-up"
              + (f"; traces in {folder}" if options.keep else ""))
        for kind in KINDS:
            print_comparison(kind, load_summary(theirs[kind]), load_summary(ours[kind]),
                             options.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
