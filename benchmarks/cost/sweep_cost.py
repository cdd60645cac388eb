"""What a sweep costs, case by case, against another tool run on the same cases; and where
our runner's time goes.

Two comparisons:

- `cpu`: each case is a sweep (the same flags for both tools) run by our runner and by
  PyTorch/XLA's `benchmarks/experiment_runner.py` (XLA_RUNNER_DIR, a copy of that folder),
  one after the other, A B A B over `--rounds`, on this machine's CPU. Each tool's figure is
  the median wall time of its whole process, start-up included.
- `gpu-per-case`: what checking one model costs: each case of the file an invocation of
  each tool of its own on the first GPU, one tool after the other (the harness first in the
  even cases, ours in the odd ones, so that neither always meets the host after the other),
  into OUT_DIR/caseN, the harness run once, plainly and cold. A case folder holding `done`
  is left as it is, so the same command goes on where a time limit (`--budget` seconds: no
  case is started with less than `--case-at-least` left, and a tool still running at the
  budget's end is stopped) cut it.
- `gpu`: the cases of a cases file (benchmarks/fidelity/fidelity.sh's format) run by PyTorch's
  dynamo harness and by ours side by side, each tool on its own GPUs and cores, through
  benchmarks/fidelity/fidelity.sh (HARNESS_GPUS, OUR_GPUS; ours at its defaults, so 3 timing
  processes per case); with neither set (a host of one GPU), one tool after the other on
  the first GPU, each with all the cores. The harness's wall per case is its process's (fidelity.sh records it
  in peer-*.wall); ours' is read from its lines (below), and its invocations' walls from
  ours-*.wall. Each tool's total is the GPU-seconds it held: the sum of its cases' walls,
  our invocations' start and end shared among their cases.

For our runner, each case's parts are read from the clock readings that its children and
the runner record in every line (core/phases.py: `summary.phases`,
`phases_processes`, `verify_phases`), summed over the case's timing processes:

    runner start and planning   the runner's start until its first child was asked for
    child start / exit          from the runner's request to the child's main, with its
                                imports and set-up; and from its result to its exit
    model build                 building the model and preparing it on its stack
    workload count              the workload signature (cached after the first process)
    compile and tuning          the first warm-up iteration (the cold start: compiling)
    warm-up                     the other warm-up iterations
    timing                      the timed runs, eager and compiled, with the pulses and
                                the idle probe between them
    reference workload          the reference readings before and after the timed runs
    verification                the verification child, start to exit
    writing the line            from the case's last child on a slot to the next child
                                there (the line, the claim and the next start), or to the
                                runner's end; a later process run on a slot lent at the
                                sweep's end counts on that slot (summary.processes.slots)
    waiting for the GPU         where lanes or slots share a GPU, the children's waits for
                                their turn on it (summary.device_gate_processes)

With fidelity.sh's PER_GPU lanes, each case's parts count at its share of its GPU (over the
lanes per GPU), and the report adds each tool's whole run: its GPUs times its span.

    python -m benchmarks.cost.sweep_cost cpu XLA_RUNNER_DIR [--rounds 5] [--case FLAGS ...]
    HARNESS_GPUS=0,1 OUR_GPUS=2,3 python -m benchmarks.cost.sweep_cost gpu HARNESS_DIR OUT_DIR CASES
    python -m benchmarks.cost.sweep_cost gpu HARNESS_DIR OUT_DIR CASES      # one GPU
    python -m benchmarks.cost.sweep_cost gpu-per-case HARNESS_DIR OUT_DIR CASES [--budget S]
    python -m benchmarks.cost.sweep_cost gpu-report OUT_DIR [OUT_DIR ...]   # the table again
    python -m benchmarks.cost.sweep_cost parts RESULTS.jsonl [--runner-wall OUT_DIR]

An OUT_DIR may also be a run of a table kept in benchmarks/tables (TABLE/PART:
benchmarks/table_inputs.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from benchmarks.table_inputs import Run, Runs
from core.files.results_file import read_results

ROOT = Path(__file__).resolve().parents[2]

#: The CPU cases: PyTorch/XLA's dummy suite, eager and PJRT (lazy tensor), eval and train in
#: one sweep; then the builtin suite's mlp, eager, eval (ours only has the builtin suite).
CPU_CASES = [
    "--suite-name=dummy --accelerator=cpu --xla=None --xla=PJRT --dynamo=None --test=eval --test=train",
]
PARTS = ("start", "child", "build", "workload", "compile", "warmup", "timing", "reference",
         "verify", "line", "gate")
PART_TITLES = {"start": "runner start+plan", "child": "child start/exit", "build": "model build",
               "workload": "workload count", "compile": "compile+tuning", "warmup": "warm-up",
               "timing": "timing", "reference": "reference", "verify": "verification",
               "line": "writing the line", "gate": "waiting for the GPU"}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def process_phases(line: dict[str, Any]) -> list[dict[str, Any]]:
    """Each timing process's clock readings, in order ([] for a line without them)."""
    summary = line.get("summary") if isinstance(line.get("summary"), dict) else {}
    found = summary.get("phases_processes")
    if not isinstance(found, list):
        found = [summary.get("phases")]
    return [phases for phases in found if isinstance(phases, dict)]


def asked_at(phases: dict[str, Any]) -> float:
    """When the runner asked for the child (epoch seconds)."""
    return _number(phases.get("started_at")) - _number(phases.get("start_s"))


@dataclass
class Case:
    """One experiment's line, read for its cost."""

    name: str
    parts: dict[str, float] = field(default_factory=dict)
    #: fidelity.sh's name of the case (`fidelity_key`).
    key: str = ""
    #: The GPU its children saw (CUDA_VISIBLE_DEVICES), "" where none was named.
    gpu: str = ""
    #: Each of its children: the slot it ran on, its start and its end (epoch seconds).
    children: list[tuple[str, float, float]] = field(default_factory=list)
    #: The slots of its invocation that shared its GPU (`attribute_invocations`; 0: not
    #: known, the invocation's span was not recorded).
    sharers: int = 0

    @property
    def wall(self) -> float:
        return sum(self.parts.values())

    @property
    def start(self) -> float:
        """When the runner asked for its first child (epoch seconds)."""
        return self.children[0][1]


def _union(spans: list[tuple[float, float]]) -> float:
    """The seconds covered by at least one of `spans` (start, end)."""
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


def case_of(line: dict[str, Any]) -> Optional[Case]:
    """The line's case with its parts (the line's own; `start` and `line` are filled by
    `attribute`), or None for a line without clock readings."""
    processes = process_phases(line)
    if not processes:
        return None
    summary = line.get("summary") or {}
    parts = dict.fromkeys(PARTS, 0.0)
    spans = []
    for phases in processes:
        parts["child"] += (_number(phases.get("start_s")) + _number(phases.get("setup_s"))
                           + _number(phases.get("exit_s")) + _number(phases.get("finish_s")))
        parts["build"] += _number(phases.get("build_s")) + _number(phases.get("prepare_s"))
        parts["workload"] += _number(phases.get("workload_s"))
        parts["reference"] += _number(phases.get("reference_s"))
        parts["timing"] += _number(phases.get("measure_s"))
        spans.append((asked_at(phases), asked_at(phases) + _number(phases.get("wall_s"))))
    listed = summary.get("processes") if isinstance(summary.get("processes"), dict) else {}
    colds = listed.get("cold_start_times") or [summary.get("cold_start_time")]
    warmups = listed.get("warmup_seconds") or [sum(summary.get("warmup_times") or [])]
    cold, warm = sum(map(_number, colds)), sum(map(_number, warmups))
    parts["compile"] = cold
    parts["warmup"] = max(0.0, warm - cold)
    # A GPU shared by lanes or slots (child/device_gate.py): the waits for the card,
    # the first one before the build, the others in the measuring (after a compile).
    gates = [g for g in summary.get("device_gate_processes") or [summary.get("device_gate")]
             if isinstance(g, dict)]
    waited = sum(_number(g.get("waited_s")) for g in gates)
    first_waits = sum(_number(p.get("gate_s")) for p in processes)
    parts["gate"] = waited
    parts["timing"] = max(0.0, parts["timing"] - warm - max(0.0, waited - first_waits))
    # Whatever the parent did between processes (reading a result, starting the next).
    walls = sum(_number(p.get("wall_s")) for p in processes)
    parts["child"] += max(0.0, walls - sum(parts.values()))
    # Processes that ran at once (summary.processes.later_at_once) held the one GPU together:
    # their parts are scaled to the time the GPU was held, the union of their spans.
    held = _union(spans)
    if listed.get("later_at_once") and walls > 0 and held < walls:
        parts = {name: value * held / walls for name, value in parts.items()}
    verify = summary.get("verify_phases")
    if isinstance(verify, dict):
        parts["verify"] = _number(verify.get("wall_s"))
        spans.append((asked_at(verify), asked_at(verify) + parts["verify"]))
    model, experiment = line.get("model") or {}, line.get("experiment") or {}
    name = " ".join(str(x) for x in (model.get("suite_name"), model.get("model_name"),
                                     line.get("stack_label") or experiment.get("stack"),
                                     experiment.get("test"), experiment.get("precision")))
    environment = line.get("environment") or {}
    variables = environment.get("variables") or {}
    settings = environment.get("torch_settings") or {}
    gpu = str(variables.get("CUDA_VISIBLE_DEVICES") or "")
    # Where each child ran: the slots the runner names (a later process may have run on a
    # slot lent at the sweep's end), else the line's own cores; verification on the first's.
    indices = listed.get("slots") if isinstance(listed.get("slots"), list) else None
    if indices is not None and len(indices) == len(processes):
        places = [f"{gpu}|slot {index}" for index in indices]
    else:
        places = ["|".join((gpu, str(settings.get("cpu_affinity") or "")))] * len(processes)
    places += [places[0]] * (len(spans) - len(places))
    children = [(place, start, end) for place, (start, end) in zip(places, spans)]
    return Case(name, parts, fidelity_key(line), gpu, children)


def attribute(cases: list[Case], runner_start: Optional[float], runner_end: Optional[float],
              slots: int = 1) -> None:
    """Give each case the time between its children and the next child of their slots
    (writing its line, starting the next; between two processes of its own, the parent's
    time between children), the time from a slot's last child to the runner's end (when
    known), and its share of the runner's start (each of `slots` slots waited for it)."""
    by_slot: dict[str, list[tuple[float, float, Case]]] = {}
    for case in cases:
        for place, start, end in case.children:
            by_slot.setdefault(place, []).append((start, end, case))
    for chain in by_slot.values():
        chain.sort(key=lambda child: child[0])
        for (_, end, case), (following, _, other) in zip(chain, chain[1:]):
            case.parts["child" if other is case else "line"] += max(0.0, following - end)
        if runner_end is not None:
            _, end, case = chain[-1]
            case.parts["line"] += max(0.0, runner_end - end)
    if runner_start is not None and cases:
        first = min(case.start for case in cases)
        share = max(0.0, first - runner_start) * slots / len(cases)
        for case in cases:
            case.parts["start"] = share


def parts_table(cases: list[Case], others: Optional[dict[str, float]] = None,
                other_name: str = "") -> str:
    """One row per case: its wall, the other tool's and their ratio where given, its parts."""
    header = ["case", "ours s"] + ([f"{other_name} s", "ratio"] if others is not None else []) \
        + [PART_TITLES[p] for p in PARTS]
    rows = []
    for case in cases:
        row = [case.name, f"{case.wall:.2f}"]
        if others is not None:
            other = others.get(case.name)
            row += [f"{other:.2f}" if other else "-",
                    f"{case.wall / other:.2f}" if other else "-"]
        row += [f"{case.parts[p]:.2f}" for p in PARTS]
        rows.append(row)
    totals = {p: sum(c.parts[p] for c in cases) for p in PARTS}
    wall = sum(totals.values())
    row = ["all cases", f"{wall:.2f}"]
    if others is not None:
        # The ratio over the cases both tools ran: a case the other tool failed has no wall.
        other = sum(others.get(c.name) or 0.0 for c in cases)
        both = sum(c.wall for c in cases if others.get(c.name))
        row += [f"{other:.2f}", f"{both / other:.2f}" if other else "-"]
    rows.append(row + [f"{totals[p]:.2f}" for p in PARTS])
    rows.append(["share of ours", ""] + (["", ""] if others is not None else [])
                + [f"{totals[p] / wall:.0%}" if wall else "-" for p in PARTS])
    return markdown(header, rows)


def markdown(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


# ---- CPU: against PyTorch/XLA's runner -------------------------------------------------

def run_timed(command: list[str], cwd: Path, environment: Optional[dict[str, str]] = None
              ) -> tuple[float, float, float, int]:
    """Start, end (epoch) and wall seconds of `command`, and its exit status."""
    start_epoch, start = time.time(), time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        print(f"{command[1]} exited {done.returncode}: {done.stderr[-1500:]}", file=sys.stderr)
    return start_epoch, start_epoch + wall, wall, done.returncode


def cpu(options: argparse.Namespace) -> int:
    xla_runner = options.directory.resolve() / "experiment_runner.py"
    if not xla_runner.exists():
        raise SystemExit(f"no experiment_runner.py in {options.directory} (a copy of "
                         "PyTorch/XLA's benchmarks folder)")
    cases = options.case or CPU_CASES
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} before; "
          f"{options.rounds} rounds, A B A B")
    with tempfile.TemporaryDirectory(prefix="sweep-cost-") as scratch:
        for number, flags in enumerate(cases):
            words = flags.split()
            ours, theirs, ratios, last = [], [], [], None
            for round_number in range(options.rounds):
                folder = Path(scratch) / f"{number}-{round_number}"
                start, end, wall, _ = run_timed(
                    [sys.executable, str(ROOT / "experiment_runner.py"), *words, "--no-progress",
                     f"--output-dirname={folder}/ours"], ROOT)
                ours.append(wall)
                last = (folder / "ours" / "results.jsonl", start, end)
                _, _, their_wall, _ = run_timed(
                    [sys.executable, str(xla_runner), *words, f"--output-dirname={folder}/theirs"],
                    xla_runner.parent)
                theirs.append(their_wall)
                ratios.append(wall / their_wall)
            print(f"\n## {flags}\n")
            print(markdown(["tool", "median s", "min s", "max s"],
                           [["ours", *(f"{f(ours):.2f}" for f in (statistics.median, min, max))],
                            ["PyTorch/XLA's runner",
                             *(f"{f(theirs):.2f}" for f in (statistics.median, min, max))]]))
            print(f"\nours / theirs, pair by pair: median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f})\n")
            path, start, end = last
            found = [c for c in map(case_of, read_results(path).lines) if c is not None] if path.exists() else []
            attribute(found, start, end)
            print("ours, the last round's sweep, seconds per experiment:\n")
            print(parts_table(found))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


# ---- GPU: against PyTorch's dynamo harness, side by side (benchmarks/fidelity/fidelity.sh) -------

def harness_failed(rows: Optional[list[dict[str, str]]]) -> bool:
    """Whether the harness's CSV rows of a case say it measured nothing: it writes a row of
    zeros (speedup and latency 0) when a model fails to load or run."""
    def measured(row: dict[str, str]) -> bool:
        try:
            return float(row.get("abs_latency") or 0) > 0
        except ValueError:
            return False
    return rows is not None and not any(measured(row) for row in rows)


def harness_walls(out: Run, failed: Optional[list[str]] = None) -> dict[str, float]:
    """The harness's wall per case (peer-SUITE-MODEL-bsBATCH-PRECISION-MODE-TEST.wall:
    start end), without the cases it failed (their names are added to `failed`)."""
    walls = {}
    for name, text in out.walls.items():
        if not name.startswith("peer-"):
            continue
        try:
            start, end = map(float, text.split()[:2])
        except ValueError:
            continue
        case = name.removeprefix("peer-")
        if harness_failed(out.harness_rows(name)):
            if failed is not None:
                failed.append(case)
            continue
        walls[case] = end - start
    return walls


@dataclass(frozen=True)
class Span:
    """What a .wall file of fidelity.sh holds: a start and end (epoch), the GPUs held, and
    the lanes that shared them (one a GPU unless PER_GPU lanes)."""

    start: float
    end: float
    gpus: int
    lanes: int

    @property
    def held(self) -> float:
        """GPU-seconds: the GPUs times the span."""
        return (self.end - self.start) * self.gpus


def read_span(text: Optional[str]) -> Optional[Span]:
    """A .wall file's span ("start end gpus [lanes]"), or None where it has none."""
    try:
        words = (text or "").split()
        gpus = int(words[2])
        return Span(float(words[0]), float(words[1]), gpus,
                    int(words[3]) if len(words) > 3 else gpus)
    except (ValueError, IndexError):
        return None


def invocation_walls(out: Run) -> list[tuple[Span, Optional[str]]]:
    """Our invocations' spans (ours-GROUP.wall), each with the case of an invocation of one
    case (ours-case-NAME.wall: NAME, else None)."""
    found = []
    for name, text in sorted(out.walls.items(), key=lambda item: item[0] + ".wall"):
        span = read_span(text)
        if not name.startswith("ours-") or name == "ours-lanes" or span is None:
            continue
        found.append((span, name.removeprefix("ours-case-")
                      if name.startswith("ours-case-") else None))
    return found


def attribute_invocations(cases: list[Case],
                          invocations: list[tuple[Span, Optional[str]]]) -> None:
    """Give each of our invocations (`invocation_walls`) its start and end (`attribute`): to
    its one case, or to the cases that started within it (lanes run other invocations
    meanwhile, so an invocation of one case names it). Every slot of the invocation (several
    a GPU with --experiments-per-gpu) waited for its start."""
    for span, case_name in invocations:
        inside = [c for c in cases if (c.key == case_name if case_name is not None
                                       else span.start <= c.start <= span.end)]
        per_gpu = slots_per_gpu(inside)
        attribute(inside, span.start, span.end, max(span.gpus, sum(per_gpu.values())))
        for case in inside:
            case.sharers = per_gpu[case.gpu]


def slots_per_gpu(cases: list[Case]) -> dict[str, int]:
    """How many slots the children of `cases` ran on, for each GPU."""
    places: dict[str, set[str]] = {}
    for case in cases:
        places.setdefault(case.gpu, set()).update(place for place, _, _ in case.children)
    return {gpu: len(found) for gpu, found in places.items()}


def share_gpus(cases: list[Case], sharers: Callable[[Case], int]) -> None:
    """Count each case at its share of its GPU: its parts over the `sharers` of it."""
    for case in cases:
        count = max(1, sharers(case))
        case.parts = {part: seconds / count for part, seconds in case.parts.items()}


def whole_run(invocations: list[Span], slots_per_gpu: int) -> Span:
    """Our invocations of one OUT_DIR (one after the other) as one span of the GPU time they
    held: from the first start, on the most GPUs one held, with `slots_per_gpu` slots a GPU."""
    gpus = max(span.gpus for span in invocations)
    start = min(span.start for span in invocations)
    return Span(start, start + sum(span.held for span in invocations) / gpus, gpus,
                gpus * slots_per_gpu)


def fidelity_key(line: dict[str, Any]) -> str:
    """fidelity.sh's name of a line's case: SUITE-MODEL-bsBATCH-PRECISION-MODE-TEST."""
    model, experiment = line.get("model") or {}, line.get("experiment") or {}
    batch = experiment.get("requested_batch_size") or experiment.get("batch_size")
    batch = int(batch) if isinstance(batch, (int, float)) else batch
    return "-".join(str(x) for x in (model.get("suite_name"), model.get("model_name"),
                                     f"bs{batch}", experiment.get("precision"),
                                     experiment.get("mode") or "default", experiment.get("test")))


def gpu_report(outs: list[Path]) -> int:
    """The side-by-side table of fidelity.sh's outputs (one or more OUT_DIRs)."""
    cases, theirs = [], {}
    spans: list[tuple[Span, Optional[Span]]] = []
    runs = Runs()
    failed: list[str] = []
    for out in map(runs.open, outs):
        harness = harness_walls(out, failed)
        lines = out.lines()
        found = []
        for line in lines:
            case = case_of(line)
            if case is not None:
                case.name = case.key
                found.append(case)
                if case.key in harness:
                    theirs[case.key] = harness[case.key]
        invocations = invocation_walls(out)
        attribute_invocations(found, invocations)
        lanes = read_span(out.walls.get("ours-lanes"))
        if lanes is not None:
            # PER_GPU lanes share each GPU: a case held its GPU for its lane's time over the
            # lanes per GPU.
            share_gpus(found, lambda case: lanes.lanes / lanes.gpus)
            spans.append((lanes, read_span(out.walls.get("peer-streams"))))
        else:
            # Slots of one invocation that share a GPU (--experiments-per-gpu): a case held
            # its GPU for its time over the slots of its invocation on that GPU.
            alone = {case_name for _, case_name in invocations if case_name is not None}
            grouped = [case for case in found if case.key not in alone]
            # A run stopped before its invocation's end has no span: its cases' slots are
            # those its lines name on each GPU.
            unknown = [case for case in grouped if not case.sharers]
            per_gpu = slots_per_gpu(unknown)
            for case in unknown:
                case.sharers = per_gpu[case.gpu]
            share_gpus(grouped, lambda case: case.sharers)
            groups = [span for span, case_name in invocations if case_name is None]
            if groups:
                most = max((case.sharers for case in grouped), default=1)
                spans.append((whole_run(groups, most),
                              read_span(out.walls.get("peer-streams"))))
        cases += found
    if not cases:
        print("no lines with clock readings in " + ", ".join(map(str, outs)))
        return 1
    print(parts_table(cases, theirs, "harness"))
    if failed:
        print(f"\nthe harness measured nothing on {', '.join(failed)} (its CSV row is zeros): "
              "not compared")
    paired = [c for c in cases if theirs.get(c.name)]
    ratios = [c.wall / theirs[c.name] for c in paired]
    if ratios:
        ours_total = sum(c.wall for c in paired)
        their_total = sum(theirs[c.name] for c in paired)
        print(f"\n{len(paired)} cases run by both: ours {ours_total:.0f} GPU-s, the harness "
              f"{their_total:.0f} GPU-s: {ours_total / their_total:.2f}x; per case median "
              f"{statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f})")
    for ours, harness in spans:
        text = (f"whole run: ours held {ours.gpus} GPU(s) for {ours.end - ours.start:.0f} s "
                f"({ours.lanes // ours.gpus} lanes or slots a GPU): {ours.held:.0f} GPU-s")
        if harness is not None:
            text += (f"; the harness held {harness.gpus} for {harness.end - harness.start:.0f} "
                     f"s: {harness.held:.0f} GPU-s; ours/harness {ours.held / harness.held:.2f}x")
        print(text)
    return 0


def gpu(options: argparse.Namespace) -> int:
    harness, ours = (bool(os.environ.get(name)) for name in ("HARNESS_GPUS", "OUR_GPUS"))
    if harness != ours:
        missing = "OUR_GPUS" if harness else "HARNESS_GPUS"
        raise SystemExit(f"{missing} is not set: name each tool's GPUs (say HARNESS_GPUS=0,1 "
                         "OUR_GPUS=2,3), or neither, for one tool after the other on the "
                         "first GPU")
    script = ROOT / "benchmarks" / "fidelity" / "fidelity.sh"
    start = time.time()
    # Each tool at its own pace, ours in few invocations as a sweep runs (not in lockstep,
    # which starts our runner once per case).
    environment = {"LOCKSTEP": "0", **os.environ}
    done = subprocess.run(["bash", str(script), str(options.directory), str(options.out),
                           str(options.cases)], cwd=ROOT, env=environment)
    print(f"\nfidelity.sh took {time.time() - start:.0f} s (exit {done.returncode})\n")
    return gpu_report([options.out])


#: What gpu-per-case writes in a case's folder once both tools ran it to their end.
CASE_DONE = "done"


def case_lines(cases: Path) -> list[str]:
    """The cases of a fidelity.sh cases file, one line each (comments and blanks left out)."""
    return [line.strip() for line in cases.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def stop_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """End `process` and everything it started (its own process group): SIGTERM, so that
    fidelity.sh removes the harness's cache folders, then SIGKILL after `grace` seconds;
    return once no process of the group runs (within `grace` more seconds), since a killed
    process ends when the kernel next schedules it, not when the signal is sent."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):  # what outlived the script, too
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + grace
    while group_runs(process.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def group_runs(group: int) -> bool:
    """Whether a process of process group `group` runs (a zombie, ended but not yet reaped
    by its parent, does not)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == group:
            return True
    return False


def per_case(harness: Path, out: Path, cases: Path, budget: float, case_at_least: float,
             script: Optional[Path] = None) -> list[Path]:
    """Run each case of `cases` as gpu-per-case says, within `budget` seconds: the case
    folders done, in order (those done before included)."""
    script = script or ROOT / "benchmarks" / "fidelity" / "fidelity.sh"
    deadline = time.monotonic() + budget
    done = []
    for index, line in enumerate(case_lines(cases)):
        folder = out / f"case{index}"
        if (folder / CASE_DONE).exists():
            done.append(folder)
            continue
        if deadline - time.monotonic() < case_at_least:
            print(f"{deadline - time.monotonic():.0f} s left: case {index} and after wait for "
                  "the same command again", file=sys.stderr)
            break
        if folder.exists():
            shutil.rmtree(folder)  # a case cut at a limit runs again whole
        folder.mkdir(parents=True)
        (folder / "case.txt").write_text(line + "\n")
        order = ("harness", "ours") if index % 2 == 0 else ("ours", "harness")
        finished = True
        for tool in order:
            print(f"case {index} ({line.split()[1]}): {tool}", file=sys.stderr, flush=True)
            environment = dict(os.environ, TOOLS=tool, HARNESS_RUNS="1", PER_CASE="1")
            left = deadline - time.monotonic()
            with open(folder / f"{tool}.log", "w") as log:
                ran = subprocess.Popen(["bash", str(script), str(harness), str(folder),
                                        str(folder / "case.txt")], cwd=ROOT, env=environment,
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
                try:
                    finished = ran.wait(timeout=max(1.0, left)) == 0 and finished
                except subprocess.TimeoutExpired:
                    stop_group(ran)
                    print(f"case {index}: {tool} stopped at the budget's end", file=sys.stderr)
                    return done
                except BaseException:  # Ctrl-C: its own session never saw the signal
                    stop_group(ran)
                    raise
        if finished:
            (folder / CASE_DONE).write_text("")
            done.append(folder)
    return done


def gpu_per_case(options: argparse.Namespace) -> int:
    if not options.cases.is_file():
        raise SystemExit(f"no cases file {options.cases}")
    try:
        done = per_case(options.directory, options.out, options.cases, options.budget,
                        options.case_at_least)
    except KeyboardInterrupt:
        print("stopped: the same command goes on where it stopped", file=sys.stderr)
        return 130
    total = len(case_lines(options.cases))
    print(f"{len(done)} of {total} cases done in {options.out}", file=sys.stderr)
    if not done:
        return 1
    status = gpu_report(done)
    return status if len(done) == total else 3


def parts(options: argparse.Namespace) -> int:
    found = [c for c in map(case_of, read_results(options.results).lines) if c is not None]
    if options.runner_wall:
        attribute_invocations(found, invocation_walls(Runs().open(options.runner_wall)))
    else:
        attribute(found, None, None)
    if not found:
        print(f"no lines with clock readings in {options.results}")
        return 1
    print(parts_table(found))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True)
    on_cpu = commands.add_parser("cpu", help="against PyTorch/XLA's runner, on this CPU")
    on_cpu.add_argument("directory", type=Path, help="PyTorch/XLA's benchmarks folder")
    on_cpu.add_argument("--rounds", type=int, default=5)
    on_cpu.add_argument("--case", action="append",
                        help="the flags of a case, both tools (default: CPU_CASES)")
    on_cpu.set_defaults(run=cpu)
    on_gpu = commands.add_parser("gpu", help="against PyTorch's dynamo harness, side by side")
    on_gpu.add_argument("directory", type=Path, help="PyTorch's benchmarks/dynamo folder")
    on_gpu.add_argument("out", type=Path)
    on_gpu.add_argument("cases", type=Path,
                        help="a cases file (benchmarks/fidelity/fidelity.sh's format)")
    on_gpu.set_defaults(run=gpu)
    each = commands.add_parser("gpu-per-case", help="an invocation of each tool per case, "
                               "the tools in turn, resumable")
    each.add_argument("directory", type=Path, help="PyTorch's benchmarks/dynamo folder")
    each.add_argument("out", type=Path)
    each.add_argument("cases", type=Path, help="a cases file (fidelity.sh's format)")
    each.add_argument("--budget", type=float, default=float("inf"),
                      help="seconds this command may take (default: no limit)")
    each.add_argument("--case-at-least", type=float, default=150.0,
                      help="seconds left under which no case is started (default 150)")
    each.set_defaults(run=gpu_per_case)
    report = commands.add_parser("gpu-report", help="the gpu table of earlier OUT_DIRs")
    report.add_argument("outs", type=Path, nargs="+")
    report.set_defaults(run=lambda o: gpu_report(o.outs))
    alone = commands.add_parser("parts", help="our parts for any results file")
    alone.add_argument("results", type=Path)
    alone.add_argument("--runner-wall", type=Path, default=None,
                       help="a fidelity.sh OUT_DIR whose ours-*.wall give the invocations")
    alone.set_defaults(run=parts)
    options = parser.parse_args(argv)
    return options.run(options)


if __name__ == "__main__":
    sys.exit(main())
