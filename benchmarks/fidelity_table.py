"""Print PyTorch's harness and ours side by side (used by benchmarks/fidelity.sh).

    python -m benchmarks.fidelity_table OUT_DIR CASES_FILE [--also DIR ...]
        [--harness-again DIR ...] [--ours-again DIR ...]

Each DIR is a fidelity.sh OUT_DIR or a run of a table kept in benchmarks/tables
(TABLE/PART: benchmarks/table_inputs.py).

Reads the harness's CSVs (peer-<suite>-<model>-bs<batch>-<precision>-<mode>-<test>.csv, or
without -bs<batch> or -<test> as older runs named them: speedup and abs_latency, the compiled
latency in ms) and
our OUT_DIR/ours/results.jsonl (the compiled median per iteration and the paired speedup of
the same child, and the FLOPs of one iteration from the line's workload). The last columns
show the spread of our processes and both tools' dynamo graphs and graph breaks: a
different count means the two ran different code. Prints a Markdown
table for docs/fidelity.md, then how many rows agree within 5% on compiled latency and on
speedup (and by test, where the cases hold more than one), and the card and versions our
lines recorded.

The harness's own band: where the harness ran a case more than once (fidelity.sh's
HARNESS_RUNS, default 2: peer-NAME-runK.csv beside the first run's; and --harness-again), the
row shows its runs and their spread, and the lines below the table count the rows where ours
lies within the harness's own band (and name the others): on a row ours' line flags host-bound, within the range of the harness's runs
widened by 5% on compiled latency and on speedup; on a card-bound row, within 5% of the
median of its runs (the plain bound: there the harness holds still). Below the table: how
many rows lie within the band, by class, and how far the harness's runs agree with each other.

--also DIR (repeatable): more fidelity.sh output folders (other runs) for the
cases OUT_DIR lacks: a case is taken from the first folder, OUT_DIR first, that holds both
tools' figures for it, so that each row stays one side-by-side pair; the table then says how
many rows came from each folder, and the cards line covers every folder a row came from.

--harness-again DIR (repeatable): folders where the harness ran cases again (its CSVs named as
in OUT_DIR; a CSV with the same figures as one already read is the same run, copied by a
resuming call, and counts once). Rows it ran again get the harness's runs (compiled latency
and speedup, OUT_DIR's first) and their spread, and the rows that disagree are counted again
against the range of the harness's own runs: whether ours lies within it, on both figures.
A row that disagrees also says how many of the harness's runs compiled afresh: a run whose
compile (`_compile.compile_inner` of the compilation-metrics CSV beside its CSV) took under
half the row's longest reused an earlier run's compile from the host's inductor cache, and
with it inductor's tuning of the kernels, so it repeats that tuning's figure.

--ours-again DIR (repeatable): folders where our runner ran cases again (every
ours/results.jsonl under DIR, as fidelity.sh writes them in OUT_DIR). Rows it ran again get
our runs and their spread, and the rows that disagree are counted again: whether the ranges
of both tools' runs overlap, on both figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Optional

from benchmarks.table_inputs import Run, Runs, exists

AGREEMENT = 0.05
#: A harness run whose compile took under this share of the row's longest compile reused an
#: earlier run's (the host's inductor cache keeps it across runs, --cold-start-latency or not).
REUSED_COMPILE_SHARE = 0.5
#: The harness's compile time, in its compilation-metrics CSV.
COMPILE_COLUMN = "_compile.compile_inner"


def peer_csv_rows(out: Run, suite: str, model: str, precision: str, mode: str, test: str,
                  suffix: str = "", batch: str = "", run: int = 1) -> Optional[list[dict]]:
    """The model's rows of the harness's CSV of the case (`suffix` before `.csv` names a
    companion, such as `_compilation_metrics`; `run`: the harness's run of the case in this
    folder, fidelity.sh's HARNESS_RUNS, the K-th named -runK), or None without one."""
    again = f"-run{run}" if run > 1 else ""
    for stem in (f"peer-{suite}-{model}-bs{batch}-{precision}-{mode}-{test}" if batch else None,
                 f"peer-{suite}-{model}-{precision}-{mode}-{test}",
                 f"peer-{suite}-{model}-{precision}-{mode}" if test == "eval" else None):
        rows = out.harness_rows(f"{stem}{again}{suffix}") if stem else None
        if rows is None:
            continue
        # The harness names some timm models name.tag.
        return [row for row in rows if (row.get("name") or "").split(".")[0] == model]
    return None


def peer_row(out: Run, suite: str, model: str, precision: str, mode: str, test: str,
             batch: str = "", run: int = 1):
    rows = peer_csv_rows(out, suite, model, precision, mode, test, batch=batch, run=run)
    try:
        return rows[-1] if rows and float(rows[-1]["speedup"]) > 0 else None
    except (KeyError, ValueError):
        return None


def peer_compile_seconds(out: Run, case: tuple[str, ...], run: int = 1) -> Optional[float]:
    """The harness's compile time of the case's `run` in `out` (its compilation-metrics
    CSV), or None where it has none."""
    suite, model, batch, precision, mode, test = case
    rows = peer_csv_rows(out, suite, model, precision, mode, test, "_compilation_metrics", batch,
                         run)
    try:
        return float(rows[-1][COMPILE_COLUMN]) if rows else None
    except (KeyError, ValueError, TypeError):
        return None


def fresh_compiles(compile_seconds: Iterable[Optional[float]]) -> tuple[int, int]:
    """Of runs with these compile times (None: unknown), how many compiled afresh, and how
    many have a compile time at all."""
    known = [value for value in compile_seconds if value is not None]
    if not known:
        return 0, 0
    longest = max(known)
    return sum(value >= REUSED_COMPILE_SHARE * longest for value in known), len(known)


def our_line(lines: list[dict], model: str, batch: str, precision: str, mode: str,
             test: str) -> Optional[dict]:
    for line in reversed(lines):
        experiment = line["experiment"]
        if (line["model"]["model_name"] == model and experiment["precision"] == precision
                and experiment.get("mode") == mode and experiment["test"] == test
                and str(experiment.get("requested_batch_size") or experiment.get("batch_size"))
                == batch and line["status"] == "ok"):
            return line
    return None


def graphs_of_peer(peer: Optional[dict]) -> str:
    """The harness's unique graphs and graph breaks, "graphs/breaks", or "-"."""
    if not peer or not peer.get("unique_graphs"):
        return "-"
    return f"{peer['unique_graphs']}/{peer.get('graph_breaks') or '?'}"


def graphs_of_ours(line: Optional[dict]) -> str:
    """Our line's unique dynamo graphs and graph breaks, "graphs/breaks", or "-"."""
    summary = (line or {}).get("summary", {})
    if summary.get("dynamo_unique_graphs") is None:
        return "-"
    return f"{summary['dynamo_unique_graphs']}/{summary.get('dynamo_graph_breaks', '?')}"


def read_cases(cases: Path) -> list[tuple[str, ...]]:
    found = []
    for text in cases.read_text().splitlines():
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        parts = text.split()
        found.append(tuple(parts[:5]) + ((parts[5] if len(parts) > 5 else "eval"),))
    return found


def drawn_with(cases: Path) -> Optional[str]:
    """The cases file's header of a draw (benchmarks/fidelity_cases.py --sample: "seed S:
    N cases drawn ..."), or None for chosen cases."""
    for text in cases.read_text().splitlines():
        if text.startswith("# seed "):
            return text[2:].strip()
    return None


#: The most runs of one case the table looks for in one folder (fidelity.sh's HARNESS_RUNS).
MOST_RUNS = 50


def folder_runs(folder: Run, case: tuple[str, ...], first: Optional[dict] = None,
                ) -> list[tuple[Optional[dict], int]]:
    """The harness's rows of the case in `folder`, each with its run number: its first run
    (`first` where given), then its later ones (fidelity.sh's HARNESS_RUNS) while they last."""
    suite, model, batch, precision, mode, test = case
    rows = [(first if first is not None
             else peer_row(folder, suite, model, precision, mode, test, batch), 1)]
    for run in range(2, MOST_RUNS + 1):
        row = peer_row(folder, suite, model, precision, mode, test, batch, run)
        if row is None:
            break
        rows.append((row, run))
    return rows


def harness_runs(first: Optional[dict], folder: Run, again: list[Run],
                 case: tuple[str, ...]) -> dict[tuple[float, float], Optional[float]]:
    """The harness's runs of the case, each (compiled latency in ms, speedup) with its
    compile time in seconds (None where its folder has no compilation metrics): `first`,
    the row of `folder`, and `folder`'s later runs of the case, then each --harness-again
    folder's. A row met again with the same figures is the same run (a call that resumed an
    earlier one copied its CSV) and counts once."""
    runs: dict[tuple[float, float], Optional[float]] = {}
    rows = [(folder, row, run) for row, run in folder_runs(folder, case, first) if first]
    rows += [(path, row, run) for path in again for row, run in folder_runs(path, case)]
    for source, row, run in rows:
        if row:
            runs.setdefault((float(row["abs_latency"]), float(row["speedup"])),
                            peer_compile_seconds(source, case, run))
    return runs


def relative_spread(values: list[float]) -> float:
    """(highest - lowest) / lowest."""
    return (max(values) - min(values)) / min(values)


def within_band(figures: tuple[float, float], runs: list[tuple[float, float]],
                card_bound: bool, bound: float = AGREEMENT) -> bool:
    """Whether ours (compiled latency, speedup) agrees with the harness's runs of the row
    within the harness's own band: on a host-bound row, within the range of its runs widened
    by `bound` on either side; on a card-bound row, within `bound` of its runs' median (the
    plain bound: there the harness holds still). Both figures must."""
    for mine, theirs in zip(figures, zip(*runs)):
        if card_bound:
            middle = statistics.median(theirs)
            if abs(mine - middle) > bound * middle:
                return False
        elif not min(theirs) * (1 - bound) <= mine <= max(theirs) * (1 + bound):
            return False
    return True


def our_figures(line: Optional[dict]) -> Optional[tuple[float, float]]:
    """A line's (compiled latency in ms, speedup), from its paired speedup, or None."""
    paired = (line or {}).get("summary", {}).get("paired_speedup")
    if not paired:
        return None
    return paired["eager_median_per_iter_time"] / paired["speedup"] * 1e3, paired["speedup"]


def our_runs(first: Optional[dict], again: list[list[dict]],
             case: tuple[str, ...]) -> list[tuple[float, float]]:
    """Our (compiled latency in ms, speedup) of each run of the case: `first`, OUT_DIR's
    line, then each --ours-again folder's that has one."""
    _, model, batch, precision, mode, test = case
    lines = [first, *(our_line(folder_lines, model, batch, precision, mode, test)
                      for folder_lines in again)]
    return [figures for figures in map(our_figures, lines) if figures]


def ranges_overlap(runs: list[tuple[float, float]], others: list[tuple[float, float]]) -> bool:
    """Whether two tools' runs overlap in compiled latency and in speedup."""
    return all(min(mine) <= max(theirs) and min(theirs) <= max(mine)
               for mine, theirs in zip(zip(*runs), zip(*others)))


def runs_cells(runs: list[tuple[float, float]]) -> list[str]:
    """A tool's runs and the spread of their compiled latency, or dashes for one run."""
    if len(runs) < 2:
        return ["-", "-"]
    latencies = [latency for latency, _ in runs]
    return ["; ".join(f"{latency:.2f} ms, {speedup:.2f}x" for latency, speedup in runs),
            f"{(max(latencies) - min(latencies)) / min(latencies):.1%}"]


def is_host_bound(line: Optional[dict]) -> bool:
    """Whether our line flags its compiled iterations host-bound (launching, not the card,
    sets their time)."""
    return bool((line or {}).get("summary", {}).get("host_bound"))


#: Host pulses this many times apart read two states of the host (docs/timing.md: the
#: slow-period bound, runner/run/record/slow_periods.py).
HOST_STATES_APART = 1.3


def host_states(summary: dict) -> str:
    """Our processes' eager and compiled medians beside each one's host pulse (the median
    of its pulses during the timed runs), when the pulses read the host in two states
    (HOST_STATES_APART): the figures that follow the pulse are the host's speed, measured
    process by process. Empty otherwise, or without the readings."""
    processes = summary.get("processes") or {}
    compiled = processes.get("medians") or []
    eager = processes.get("eager_medians") or []
    pulses = [((reference or {}).get("during") or {}).get("host_ms")
              for reference in summary.get("reference_processes") or []]
    if (len(pulses) < 2 or len(pulses) != len(compiled)
            or not all(isinstance(p, (int, float)) and p > 0 for p in pulses)
            or max(pulses) < HOST_STATES_APART * min(pulses)):
        return ""

    def milliseconds(values: list) -> str:
        return "/".join(f"{value * 1e3:.2f}" for value in values)

    text = f"ours' processes {milliseconds(compiled)} ms"
    if len(eager) == len(compiled):
        text += f" (eager {milliseconds(eager)})"
    return text + " at host pulses " + "/".join(f"{pulse:.2f}" for pulse in pulses) + " ms"


def evidence(line: Optional[dict], theirs: list[tuple[float, float]],
             fresh: tuple[int, int] = (0, 0)) -> str:
    """What our line and the harness's runs say about a row that disagrees: host-bound or
    not, our processes' spread and timing variation, their figures beside the host's state
    when it changed between them (host_states), the range of the harness's runs and
    how many of them compiled afresh (`fresh`: afresh, with a compile time)."""
    summary = (line or {}).get("summary", {})
    parts = []
    fraction = summary.get("host_bound_fraction")
    if is_host_bound(line):
        parts.append(f"host-bound ({fraction:.0%} of ours' iterations)")
    elif isinstance(fraction, (int, float)):
        parts.append(f"not host-bound ({fraction:.0%} of ours' iterations)")
    spread = (summary.get("processes") or {}).get("spread")
    if isinstance(spread, (int, float)):
        parts.append(f"ours' processes spread {spread:.1%}")
    variation = summary.get("timing_variation")
    if isinstance(variation, (int, float)):
        parts.append(f"timing variation {variation:.1%}"
                     + (" (flagged unreliable)" if summary.get("unreliable") else ""))
    states = host_states(summary)
    if states:
        parts.append(states)
    if len(theirs) > 1:
        latencies = [latency for latency, _ in theirs]
        speedups = [speedup for _, speedup in theirs]
        parts.append(f"the harness's {len(theirs)} runs {min(latencies):.2f}-"
                     f"{max(latencies):.2f} ms, {min(speedups):.2f}-{max(speedups):.2f}x")
        afresh, timed = fresh
        if timed > 1 and afresh == timed:
            parts.append(f"all {timed} with a compile time compiled afresh")
        elif timed > 1:
            parts.append(f"{afresh} of the {timed} with a compile time compiled afresh (the "
                         "others reused an earlier run's compile and tuning)")
    return "; ".join(parts) or "no more figures"


def side_by_side(sources: list[tuple[Run, list[dict]]], case: tuple[str, ...]
                 ) -> tuple[Run, Optional[dict], Optional[dict]]:
    """The case's (folder, the harness's row, our line) from the first folder of `sources`
    (folder, our lines there) that holds both, else from the first folder."""
    suite, model, batch, precision, mode, test = case
    found = [(folder, peer_row(folder, suite, model, precision, mode, test, batch),
              our_line(lines, model, batch, precision, mode, test)) for folder, lines in sources]
    return next((row for row in found if row[1] and row[2]), found[0])


def main(out: Path, cases: Path, again: Optional[list[Path]] = None,
         ours_again: Optional[list[Path]] = None, also: Optional[list[Path]] = None,
         ran_only: bool = False) -> int:
    runs_at = Runs()
    again = [runs_at.open(folder) for folder in again or []]
    ours_again_lines = [runs_at.open(folder).lines(below=True) for folder in ours_again or []]
    sources = [(run, run.lines()) for run in map(runs_at.open, [out, *(also or [])])]
    rows_from: Counter[str] = Counter()  # folder -> rows compared from it
    header = ("model", "test", "bs", "prec", "mode", "peer eager", "peer ind.", "peer x",
              "ours eager", "ours ind.", "ours x", "latency d", "speedup d", "TFLOP/s ours",
              "ours spread", "graphs/breaks peer, ours")
    rows = []  # per case: the case, its folder, the harness's row, our line, the harness's runs
    for case in read_cases(cases):
        folder, peer, ours = side_by_side(sources, case)
        if ran_only and not (peer or ours):
            continue
        rows.append((case, folder, peer, ours, harness_runs(peer, folder, again, case)))
    # The harness ran some cases more than once: its own band, and its runs.
    banded = bool(again) or any(len(runs) > 1 for *_, runs in rows)
    if banded:
        header += ("peer runs: ind., x", "peer spread")
    if ours_again_lines:
        header += ("ours runs: ind., x", "ours runs spread")
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    compared = agree = again_disagreeing = inside = both_again = overlapping = 0
    host_bound = [0, 0]  # [rows that agree, rows compared] among rows ours flags host-bound
    disagreeing: list[str] = []  # a line per row that does not agree, with its evidence
    by_test: dict[str, list[int]] = {}  # test -> [rows that agree, rows compared]
    in_band = {"host-bound": [0, 0], "card-bound": [0, 0]}  # [within the band, rows compared]
    harness_spreads: list[tuple[float, float]] = []  # per row run again: latency, speedup
    outside_band: list[str] = []  # the rows ours does not lie within the harness's band
    for case, folder, peer, ours, runs in rows:
        suite, model, batch, precision, mode, test = case
        rows_from[folder.name] += bool(peer and ours)
        cells = [model, test, batch, precision, mode]
        figures = our_figures(ours)
        theirs = list(runs)
        if peer:
            speedup, latency = float(peer["speedup"]), float(peer["abs_latency"])
            cells += [f"{latency * speedup:.2f} ms", f"{latency:.2f} ms", f"{speedup:.2f}x"]
        else:
            cells += ["-", "-", "-"]
        if figures:
            compiled_ms, our_speedup = figures
            cells += [f"{compiled_ms * our_speedup:.2f} ms", f"{compiled_ms:.2f} ms",
                      f"{our_speedup:.2f}x"]
        else:
            cells += ["-", "-", "-"]
        agreed = None
        if peer and figures:
            latency_d = (compiled_ms - latency) / latency
            speedup_d = (our_speedup - speedup) / speedup
            cells += [f"{latency_d:+.1%}", f"{speedup_d:+.1%}"]
            compared += 1
            agreed = abs(latency_d) <= AGREEMENT and abs(speedup_d) <= AGREEMENT
            agree += agreed
            tally = by_test.setdefault(test, [0, 0])
            tally[0] += agreed
            tally[1] += 1
            if is_host_bound(ours):
                host_bound[0] += agreed
                host_bound[1] += 1
            if not agreed:
                disagreeing.append(f"{model} {test}: {latency_d:+.1%}, {speedup_d:+.1%}; "
                                   + evidence(ours, theirs, fresh_compiles(runs.values())))
        else:
            cells += ["-", "-"]
        flops = ((ours or {}).get("workload") or {}).get("flops_per_iteration")
        cells.append(f"{flops / compiled_ms / 1e9:.1f}" if flops and figures else "-")
        spread = ((ours or {}).get("summary", {}).get("processes") or {}).get("spread")
        cells.append(f"{spread:.1%}" if isinstance(spread, (int, float)) else "-")
        cells.append(f"{graphs_of_peer(peer)}, {graphs_of_ours(ours)}")
        if banded:
            if agreed is not None:
                kind = "host-bound" if is_host_bound(ours) else "card-bound"
                banded_in = within_band(figures, theirs, kind == "card-bound")
                in_band[kind][0] += banded_in
                in_band[kind][1] += 1
                if not banded_in:
                    outside_band.append(f"{model} {test} ({kind})")
            cells += runs_cells(theirs)
            if len(theirs) > 1:
                harness_spreads.append(tuple(relative_spread(list(values))
                                             for values in zip(*theirs)))
            if again and len(theirs) > 1 and agreed is False:
                again_disagreeing += 1
                inside += ranges_overlap(theirs, [figures])
        if ours_again_lines:
            mine = our_runs(ours, ours_again_lines, case)
            cells += runs_cells(mine)
            if agreed is False and len(mine) + len(theirs) > 2:
                both_again += 1
                overlapping += ranges_overlap(mine, theirs)
        print("| " + " | ".join(cells) + " |")
    print(f"\n{agree} of {compared} rows with both figures agree within {AGREEMENT:.0%} on "
          f"compiled latency and on speedup.")
    drawn = drawn_with(cases)
    if drawn:
        print(f"Cases: {drawn}.")
    if len(by_test) > 1:
        print("By test: " + "; ".join(f"{test} {agreed} of {rows}"
                                      for test, (agreed, rows) in sorted(by_test.items())) + ".")
    if compared:
        print(f"Host-bound in ours' line (summary.host_bound: the host's launching, not the "
              f"card, sets the time): {host_bound[0]} of {host_bound[1]} agree; the other rows: "
              f"{agree - host_bound[0]} of {compared - host_bound[1]}.")
    if banded and compared:
        (host_in, host_rows), (card_in, card_rows) = in_band["host-bound"], in_band["card-bound"]
        print(f"Within the harness's own band: {host_in + card_in} of {compared} rows (host-bound "
              f"in ours' line: {host_in} of {host_rows}, within the range of the harness's runs "
              f"widened by {AGREEMENT:.0%}; card-bound: {card_in} of {card_rows}, within "
              f"{AGREEMENT:.0%} of the median of its runs), on compiled latency and speedup"
              + (f"; outside it: {', '.join(outside_band)}." if outside_band else "."))
    if harness_spreads:
        steady = sum(latency <= AGREEMENT and speedup <= AGREEMENT
                     for latency, speedup in harness_spreads)
        print(f"The harness's own runs, on the {len(harness_spreads)} rows it ran more than "
              f"once: they agree with each other within {AGREEMENT:.0%} on both figures in "
              f"{steady}; their spread ((highest - lowest) / lowest), median "
              f"{statistics.median(s for s, _ in harness_spreads):.1%} in compiled latency, "
              f"{statistics.median(s for _, s in harness_spreads):.1%} in speedup.")
    if again:
        print(f"Of the {compared - agree} that do not, {again_disagreeing} have the harness run "
              f"again: ours lies within the range of the harness's own runs, on both figures, "
              f"in {inside} of them.")
    if ours_again_lines:
        print(f"Of the {compared - agree} that do not, {both_again} have either tool run again: "
              f"the ranges of both tools' runs overlap, on both figures, in {overlapping} of "
              f"them.")
    if disagreeing:
        print("Rows that disagree (latency d, speedup d; what the lines show):")
        for text in disagreeing:
            print(f"- {text}")
    if also:
        print("Rows from: " + "; ".join(f"{folder.name} {rows_from[folder.name]}"
                                        for folder, _ in sources) + ".")
    describe_machine([line for folder, lines in sources if rows_from[folder.name]
                      for line in lines] or sources[0][1])
    return 0


def describe_machine(lines: list[dict[str, Any]]) -> None:
    """The cards and versions our lines recorded."""
    cards = sorted({line["experiment"].get("accelerator_model") or "?" for line in lines})
    versions = sorted({json.dumps({name: (line.get("environment") or {}).get("packages", {}).get(name)
                                   for name in ("torch", "transformers", "timm")}, sort_keys=True)
                       for line in lines})
    if lines:
        print(f"Cards: {', '.join(cards)}. Versions: {'; '.join(versions)}.")


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="PyTorch's harness and ours side by side.")
    parser.add_argument("out", type=Path, help="fidelity.sh's output folder")
    parser.add_argument("cases", type=Path, help="the cases file")
    parser.add_argument("--also", type=Path, action="append", default=[], metavar="DIR",
                        help="another fidelity.sh output folder, for the cases OUT_DIR lacks")
    parser.add_argument("--harness-again", type=Path, action="append", default=[],
                        metavar="DIR", help="a folder where the harness ran cases again")
    parser.add_argument("--ours-again", type=Path, action="append", default=[],
                        metavar="DIR", help="a folder where our runner ran cases again "
                        "(every ours/results.jsonl under it)")
    parser.add_argument("--ran-only", action="store_true",
                        help="leave out the cases that neither tool ran (a run of some of "
                        "the cases file's cases)")
    runs = Runs()
    arguments = parser.parse_args(argv)
    for folder in [arguments.out, *arguments.also, *arguments.harness_again, *arguments.ours_again]:
        if not exists(folder, runs):
            parser.error(f"no such folder, nor a run of a table: {folder}")
    if not arguments.cases.is_file():
        parser.error(f"no such cases file: {arguments.cases}")
    return arguments


if __name__ == "__main__":
    parsed = parse_arguments(sys.argv[1:])
    sys.exit(main(parsed.out, parsed.cases, parsed.harness_again, parsed.ours_again, parsed.also,
                  parsed.ran_only))
