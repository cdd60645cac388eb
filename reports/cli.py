"""Command-line entry points: `report`, `compare` and `score`.

Each `*_main(argv)` parses its own arguments and returns an exit code, one per outcome:

- 0: done (compare: nothing regressed);
- 1: compare only: something regressed;
- 2: bad input: a flag, or a results file that cannot be read (the message goes to stderr);
- 3: compare only: nothing to compare (no experiment in common, or none that ran on both
  sides), so no verdict either way;
- 4: the command could not finish (the machine: a full disk; or a bug, with its
  traceback): never a verdict on the results.

Every text of the results or the command line (paths, model names) is printed through
`core.text.printable`, so that none can forge a console line.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

from core.files.bisect_log import LOG_SUFFIX, log_path
from reports.analyse.aggregate import DEFAULT_BASELINE, build_report
from reports.read.cache import default_cache_dir
from reports.analyse.compare import DEFAULT_ALPHA, DEFAULT_GEOMEAN_THRESHOLD, DEFAULT_THRESHOLD, Comparison, compare
from reports.analyse.bisection import bisect_steps
from reports.analyse.dashboard import build_payload
from reports.read.columnar import Engine
from core.text import PrintableFormatter, printable
from reports.errors import MachineError, ReportError
from reports.analyse.history import compute_history
from reports.read.load import Loaded, load, select_records
from reports.render.bisect_table import bisect_table
from reports.render.plots import render_plots
from reports.render.render_csv import render_csv
from reports.render.render_html import render_html
from reports.render.render_hud_csv import render_hud_csv
from reports.render.render_markdown import render_markdown
from reports.render.render_text import render_tables
from reports.analyse.score import score
from reports.analyse.settings_diff import differences_between, settings_of_lines
from reports.render.tables import (comparison_tables, console_tables, report_tables, runs_table,
                                   score_tables, settings_table, trend_table)

EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_BAD_INPUT = 2
EXIT_NOTHING_COMPARABLE = 3
EXIT_FAILED = 4


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors follow our exit-code rules."""

    def error(self, message: str):  # type: ignore[override]
        raise ReportError(f"{self.prog}: {message}")


#: How --threshold and --geomean-threshold are written.
THRESHOLD_SPELLING = "a percentage (7%%) or a fraction (0.07)"


def _fraction(text: str) -> float:
    """A threshold: '7%' or '0.07'; a bare number of 1 or more ('7') is refused: it could
    mean 7% as well as 700%."""
    text = text.strip()
    percent = text.endswith("%")
    try:
        value = float(text[:-1]) / 100 if percent else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (7%) or a fraction (0.07)") from None
    if not percent and value >= 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is ambiguous: write {text}% for {value:g} percent, or a fraction below 1 "
            f"({value / 100:g} is {value:g}%)")
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range (at least 0%, under 1000%)")
    return value


def _say(*lines: str, file=None) -> None:
    """Print lines of text made of the results' and the user's text, each made printable."""
    print("\n".join(printable(line) for line in lines), file=file or sys.stdout)


def _require_results(engine: Engine, loaded: Loaded) -> Loaded:
    """`loaded`, unless one of its files holds lines but no results line (JSON objects
    naming no model or experiment, or unreadable): ReportError, as for a file of bad lines."""
    for index in loaded.files:
        scan = engine.files[index]
        if scan.rows and scan.rows <= len(scan.bad_lines) + len(scan.unusable):
            first = min([b.lineno for b in scan.bad_lines] + list(scan.unusable))
            raise ReportError(
                f"{scan.path} holds no results line: its {scan.rows} line(s) are JSON objects "
                f"naming no model or experiment, or unreadable (line {first}, ...); results "
                "files are JSON lines written by experiment-runner")
    return loaded


def _load_notes(loaded: Loaded, name: str = "") -> list[str]:
    prefix = f"{name}: " if name else ""
    scope = f" (run {loaded.run})" if loaded.run else ""
    notes = [
        f"{prefix}{loaded.total_lines} lines, {len(loaded.records)} experiments{scope}, "
        f"{len(loaded.runs)} runs, {loaded.superseded} lines superseded by later lines"
    ]
    for bad in loaded.bad_lines[:20]:
        notes.append(f"{prefix}skipped {bad.path} line {bad.lineno}: {bad.reason}")
    if len(loaded.bad_lines) > 20:
        notes.append(f"{prefix}... and {len(loaded.bad_lines) - 20} more unreadable lines")
    if loaded.unusable:
        notes.append(f"{prefix}{len(loaded.unusable)} lines name no model or experiment (skipped)")
    return notes


def _write(path: Path, content: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            # A name that was no UTF-8 (a path's undecodable bytes) is written escaped.
            path.write_text(content, encoding="utf-8", errors="backslashreplace")
    except OSError as error:
        raise MachineError(f"cannot write {str(path)!r}: {error.strerror or error}") from error


class _DropSkippedLines(logging.Filter):
    """The CLI lists skipped lines itself (the first 20 and a count); drop the per-line logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "skipped" not in record.getMessage()


def _guard(function, argv: Optional[Sequence[str]]) -> int:
    """Run a command; its exit code, one per outcome (the module's docstring)."""
    results_log = logging.getLogger("core.files.results_file")
    dropper = _DropSkippedLines()
    results_log.addFilter(dropper)
    root = logging.getLogger()
    console = None
    if not root.handlers:  # the command's own: the log's paths and names made printable
        console = logging.StreamHandler()
        console.setFormatter(PrintableFormatter("%(message)s"))
        console.setLevel(logging.WARNING)
        root.addHandler(console)
    try:
        return function(list(sys.argv[1:] if argv is None else argv))
    except ReportError as error:
        _say(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MachineError as error:
        _say(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - a bug, or the machine: never a verdict
        traceback.print_exc()
        _say(f"error: the command could not finish ({type(error).__name__}: {error}); "
             f"exit {EXIT_FAILED} says nothing about the results", file=sys.stderr)
        return EXIT_FAILED
    finally:
        results_log.removeFilter(dropper)
        if console is not None:
            root.removeHandler(console)


def _add_cache_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where parsed results are cached (default $EXPERIMENT_RUNNER_CACHE_DIR, "
                             "else ~/.cache/experiment-runner/reports)")
    parser.add_argument("--no-cache", action="store_true", help="parse every file in full, without the cache")


def _engine(args: argparse.Namespace, settings: bool = False) -> Engine:
    """The engine of a command; `settings`: its files' settings are read (compare)."""
    return Engine(None if args.no_cache else (args.cache_dir or default_cache_dir()), settings=settings)


def report_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="experiment-runner report", description="Tables, CSV, Markdown and an HTML dashboard from results files.")
    parser.add_argument("results", nargs="+", type=Path,
                        help="results files (*.jsonl), or folders: every *.jsonl file under them")
    parser.add_argument("--baseline", default=None, help=f"stack to compare against (default {DEFAULT_BASELINE}), e.g. inductor, PJRT+openxla")
    parser.add_argument("--run", default=None, help="use only this run id (a unique prefix or 'latest'); default: each experiment's latest line")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="write report.csv, report.md, report.html and hud/*.csv here")
    parser.add_argument("--csv", type=Path, default=None, help="write the CSV here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the Markdown here")
    parser.add_argument("--html", type=Path, default=None, help="write the HTML dashboard here")
    parser.add_argument("--plots-dir", type=Path, default=None,
                        help="also write matplotlib PNG plots here (the HTML draws its own charts)")
    parser.add_argument("--hud-csv", type=Path, default=None, metavar="DIR",
                        help="write PyTorch harness CSV files here, one per configuration and suite, as the HUD reads them")
    parser.add_argument("--no-history", action="store_true", help="leave out the history across runs")
    parser.add_argument("--quiet", action="store_true", help="do not print the tables")
    _add_cache_options(parser)
    return parser


def _latest_changes(engine: Engine, loaded: Loaded) -> Optional[Comparison]:
    """The latest run (or the one asked for) against the run before it."""
    runs = [r.run_id for r in loaded.runs]
    newest = loaded.run if loaded.run is not None else (runs[-1] if runs else None)
    if newest is None or newest not in runs or runs.index(newest) == 0:
        return None
    previous = runs[runs.index(newest) - 1]
    # Usually each experiment's lines in the newest run are its latest: loaded has them.
    new = loaded.newest_records
    if new is None:
        new, _ = select_records(engine, loaded.files, newest)
    base, _ = select_records(engine, loaded.files, previous)
    comparison = compare(base, new)
    return comparison if comparison.changes else None


def _bisections(paths: Sequence[Path]) -> list:
    """The bisections logged beside the results files given (or under the folders given)."""
    logs = []
    for path in paths:
        if path.is_dir():
            logs.extend(sorted(path.rglob("*" + LOG_SUFFIX)))
        else:
            logs.append(log_path(path))
    return [steps for steps in map(bisect_steps, logs) if steps is not None]


def _report(argv: list[str]) -> int:
    args = report_parser().parse_args(argv)
    with _engine(args) as engine:
        return _report_with(engine, args)


def _report_with(engine: Engine, args: argparse.Namespace) -> int:
    loaded = _require_results(engine, load(args.results, run=args.run, engine=engine))
    report = build_report(loaded.records, args.baseline)
    tables = report_tables(report)
    history = changes = None
    if not args.no_history and len(loaded.runs) > 1:
        history = compute_history(engine, loaded.files, loaded.runs, report.baseline)
        changes = _latest_changes(engine, loaded)
        tables.insert(1, trend_table(history))
    if loaded.runs:
        tables.insert(0, runs_table(loaded.runs))
    bisections = _bisections(args.results)
    tables.extend(bisect_table(steps) for steps in bisections)
    intro = _load_notes(loaded) + report.notes
    if args.output_dir is not None:
        args.csv = args.csv or args.output_dir / "report.csv"
        args.markdown = args.markdown or args.output_dir / "report.md"
        args.html = args.html or args.output_dir / "report.html"
        args.hud_csv = args.hud_csv or args.output_dir / "hud"
    title = "Experiment report"
    if not args.quiet:
        _say(*intro, "")
        print(render_tables(console_tables(tables)), end="")
    written = []
    if args.csv:
        _write(args.csv, render_csv(report))
        written.append(args.csv)
    if args.markdown:
        _write(args.markdown, render_markdown(title, intro, tables))
        written.append(args.markdown)
    if args.plots_dir:
        for name, png in render_plots(report).items():
            _write(args.plots_dir / f"{name}.png", png)
            written.append(args.plots_dir / f"{name}.png")
    if args.hud_csv:
        hud = render_hud_csv(report)
        for name, text in hud.items():
            _write(args.hud_csv / name, text)
            written.append(args.hud_csv / name)
        if not hud:
            _say(f"{args.hud_csv}: no PyTorch harness CSV written: the results hold no "
                  f"experiment (not skipped) of a stack other than the baseline "
                  f"({report.baseline}), which the harness's files hold only as each row's "
                  "reference; run a compiled stack too (say --dynamo=inductor), or give "
                  "--baseline another stack", file=sys.stderr)
    if args.html:
        payload = build_payload(title, intro, report, history, changes, loaded.runs, bisections)
        summary = next(t for t in tables if t.title.startswith("Configurations"))
        _write(args.html, render_html(payload, [summary] + [bisect_table(b) for b in bisections]))
        written.append(args.html)
    for path in written:
        _say(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def compare_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="experiment-runner compare",
        description="Per-experiment changes of NEW against BASE, as a gate: exit 0 nothing "
                    "regressed, 1 something regressed, 2 bad input, 3 nothing to compare (no "
                    "experiment in common that ran on both sides), 4 the command could not "
                    "finish (never a verdict).")
    parser.add_argument("base", type=Path, help="results file of the base run")
    parser.add_argument("new", type=Path, help="results file of the new run")
    parser.add_argument("--base-run", default=None, help="run id to use from BASE")
    parser.add_argument("--new-run", default=None, help="run id to use from NEW")
    parser.add_argument("--threshold", type=_fraction, default=DEFAULT_THRESHOLD,
                        help=f"per-experiment change that counts, {THRESHOLD_SPELLING}; a bare number of 1 "
                             "or more is refused as ambiguous (default 7%%)")
    parser.add_argument("--geomean-threshold", type=_fraction, default=DEFAULT_GEOMEAN_THRESHOLD,
                        help=f"geometric-mean change that counts, {THRESHOLD_SPELLING} (default 1%%)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="significance level of the permutation test (default 0.05)")
    parser.add_argument("--count-unreliable", action="store_true",
                        help="judge changes whose timings are flagged unreliable (or where the machine "
                             "changed speed) like any other, and count them in the geometric mean; by "
                             "default they are listed as unreliable and left out of the gate")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the comparison as Markdown")
    _add_cache_options(parser)
    return parser


def _compare(argv: list[str]) -> int:
    args = compare_parser().parse_args(argv)
    if not 0 < args.alpha <= 1:
        raise ReportError(f"--alpha {args.alpha!r} must be in (0, 1]")
    with _engine(args, settings=True) as engine:
        base = _require_results(engine, load([args.base], run=args.base_run, engine=engine))
        new = _require_results(engine, load([args.new], run=args.new_run, engine=engine))
        result = compare(base.records, new.records, threshold=args.threshold,
                         geomean_threshold=args.geomean_threshold, alpha=args.alpha,
                         count_unreliable=args.count_unreliable)
        # The settings of the experiments compared, not of every line of either file.
        settings = differences_between(
            settings_of_lines(engine, [change.base.line_id for change in result.changes]),
            settings_of_lines(engine, [change.new.line_id for change in result.changes]))
    intro = _load_notes(base, "BASE") + _load_notes(new, "NEW") + result.notes
    gm = "-" if result.geomean_ratio is None else f"{result.geomean_ratio - 1:+.2%}"
    intro.append(
        f"geometric mean change of median time: {gm} over {result.geomean_models} experiments "
        f"(threshold {result.geomean_threshold:.0%})" + (" REGRESSED" if result.geomean_regressed else "")
    )
    intro.append(
        f"{len(result.regressions)} regressed, {len(result.improvements)} improved (threshold {result.threshold:.0%}, "
        f"alpha {result.alpha}); {len(result.only_base)} only in BASE, {len(result.only_new)} only in NEW"
    )
    tables = comparison_tables(result)
    if settings is None:
        intro.append("settings: not recorded in the lines compared (older lines), or no line compared")
    else:
        intro.append(f"{len(settings)} settings differ between the experiments compared" + (
            ": " + ", ".join(d.name for d in settings) if settings else ""))
        tables.append(settings_table(settings))
    if result.regressed:
        status, verdict = EXIT_REGRESSED, f"verdict: REGRESSED (exit {EXIT_REGRESSED})"
    elif not result.comparable:
        status = EXIT_NOTHING_COMPARABLE
        verdict = (f"verdict: nothing to compare (exit {EXIT_NOTHING_COMPARABLE}): no experiment held by "
                   "both sides ran on both")
    else:
        status, verdict = EXIT_OK, f"verdict: no regression (exit {EXIT_OK})"
    intro.append(verdict)
    _say(*intro, "")
    print(render_tables(tables), end="")
    if args.markdown:
        _write(args.markdown, render_markdown("Comparison", intro, tables))
    return status


def score_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="experiment-runner score", description="TorchBench-V1-style score: the reference scores 1000.")
    parser.add_argument("results", nargs="+", type=Path, help="results files to score")
    parser.add_argument("--reference", type=Path, required=True, help="results file of the reference run")
    parser.add_argument("--run", default=None, help="run id to use from RESULTS")
    parser.add_argument("--reference-run", default=None, help="run id to use from the reference")
    _add_cache_options(parser)
    return parser


def _score(argv: list[str]) -> int:
    args = score_parser().parse_args(argv)
    with _engine(args) as engine:
        measured = _require_results(engine, load(args.results, run=args.run, engine=engine))
        reference = _require_results(engine, load([args.reference], run=args.reference_run, engine=engine))
    result = score(measured.records, reference.records)
    print(f"score: {result.score:.1f} over {result.experiments} experiments (reference = 1000)")
    if result.unreliable:
        every = "every one" if result.unreliable == result.experiments else f"{result.unreliable}"
        _say(f"warning: {every} of the {result.experiments} experiments scored has unreliable timings "
             "(flagged on either side): the score may show the machine's speed, not the code's")
    print(render_tables(score_tables(result)), end="")
    return EXIT_OK


def report_main(argv: Optional[Sequence[str]] = None) -> int:
    """`experiment-runner report RESULTS...`; returns the exit code."""
    return _guard(_report, argv)


def compare_main(argv: Optional[Sequence[str]] = None) -> int:
    """`experiment-runner compare BASE NEW`; returns 1 when anything regressed."""
    return _guard(_compare, argv)


def score_main(argv: Optional[Sequence[str]] = None) -> int:
    """`experiment-runner score RESULTS --reference REF`; returns the exit code."""
    return _guard(_score, argv)


COMMANDS = {"report": report_main, "compare": compare_main, "score": score_main}


def close_command(word: str) -> Optional[str]:
    """The report command `word` is a slip of (`reprot`: report), if any."""
    import difflib

    found = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.6)
    return found[0] if found else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m reports.cli report|compare|score ...` (the runner's CLI dispatches the same)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        guess = close_command(args[0]) if args else None
        hint = f"; did you mean {guess!r}?" if guess else ""
        _say(f"usage: python -m reports.cli {{{','.join(COMMANDS)}}} ...{hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
