"""Command-line entry points: `report`, `compare` and `score`.

Each `*_main(argv)` parses its own arguments and returns an exit code: 0 fine, 1 (compare
only) something regressed, 2 bad input (the message goes to stderr).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional, Sequence

from core.files.bisect_log import LOG_SUFFIX, log_path
from reports.analyse.aggregate import DEFAULT_BASELINE, build_report
from reports.read.cache import default_cache_dir
from reports.analyse.compare import DEFAULT_ALPHA, DEFAULT_GEOMEAN_THRESHOLD, DEFAULT_THRESHOLD, Comparison, compare
from reports.analyse.bisection import bisect_steps
from reports.analyse.dashboard import build_payload
from reports.read.columnar import Engine
from reports.errors import ReportError
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
from reports.analyse.settings_diff import differences
from reports.render.tables import comparison_tables, report_tables, runs_table, score_tables, settings_table, trend_table

EXIT_OK = 0
EXIT_REGRESSED = 1
EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors follow our exit-code rules."""

    def error(self, message: str):  # type: ignore[override]
        raise ReportError(f"{self.prog}: {message}")


def _fraction(text: str) -> float:
    """A threshold: '7%' or '0.07'."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction or a percentage") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range")
    return value


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
            path.write_text(content, encoding="utf-8")
    except OSError as error:
        raise ReportError(f"cannot write {str(path)!r}: {error.strerror or error}") from error


class _DropSkippedLines(logging.Filter):
    """The CLI lists skipped lines itself (the first 20 and a count); drop the per-line logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "skipped" not in record.getMessage()


def _guard(function, argv: Optional[Sequence[str]]) -> int:
    results_log = logging.getLogger("core.files.results_file")
    dropper = _DropSkippedLines()
    results_log.addFilter(dropper)
    try:
        return function(list(sys.argv[1:] if argv is None else argv))
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else EXIT_OK
    finally:
        results_log.removeFilter(dropper)


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
    loaded = load(args.results, run=args.run, engine=engine)
    report = build_report(loaded.records, args.baseline)
    tables = report_tables(report)
    history = changes = None
    if not args.no_history and len(loaded.runs) > 1:
        history = compute_history(engine, loaded.files, loaded.runs, report.baseline)
        changes = _latest_changes(engine, loaded)
        tables.insert(1, trend_table(history))
    if loaded.runs:
        tables.insert(0, runs_table(loaded.runs))
    tables.extend(bisect_table(steps) for steps in _bisections(args.results))
    intro = _load_notes(loaded) + report.notes
    if args.output_dir is not None:
        args.csv = args.csv or args.output_dir / "report.csv"
        args.markdown = args.markdown or args.output_dir / "report.md"
        args.html = args.html or args.output_dir / "report.html"
        args.hud_csv = args.hud_csv or args.output_dir / "hud"
    title = "Experiment report"
    if not args.quiet:
        print("\n".join(intro) + "\n")
        print(render_tables(tables), end="")
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
            print(f"{args.hud_csv}: no PyTorch harness CSV written: the results hold no "
                  f"experiment (not skipped) of a stack other than the baseline "
                  f"({report.baseline}), which the harness's files hold only as each row's "
                  "reference; run a compiled stack too (say --dynamo=inductor), or give "
                  "--baseline another stack", file=sys.stderr)
    if args.html:
        payload = build_payload(title, intro, report, history, changes, loaded.runs)
        summary = next(t for t in tables if t.title.startswith("Configurations"))
        _write(args.html, render_html(payload, [summary]))
        written.append(args.html)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def compare_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="experiment-runner compare", description="Per-experiment changes of NEW against BASE; exit 1 on a regression.")
    parser.add_argument("base", type=Path, help="results file of the base run")
    parser.add_argument("new", type=Path, help="results file of the new run")
    parser.add_argument("--base-run", default=None, help="run id to use from BASE")
    parser.add_argument("--new-run", default=None, help="run id to use from NEW")
    parser.add_argument("--threshold", type=_fraction, default=DEFAULT_THRESHOLD, help="per-experiment change that counts (default 7%%)")
    parser.add_argument("--geomean-threshold", type=_fraction, default=DEFAULT_GEOMEAN_THRESHOLD, help="geometric-mean change that counts (default 1%%)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="significance level of the permutation test (default 0.05)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the comparison as Markdown")
    _add_cache_options(parser)
    return parser


def _compare(argv: list[str]) -> int:
    args = compare_parser().parse_args(argv)
    if not 0 < args.alpha <= 1:
        raise ReportError(f"--alpha {args.alpha!r} must be in (0, 1]")
    with _engine(args, settings=True) as engine:
        base = load([args.base], run=args.base_run, engine=engine)
        new = load([args.new], run=args.new_run, engine=engine)
        settings = differences([engine.files[i] for i in base.files], [engine.files[i] for i in new.files])
    result = compare(base.records, new.records, threshold=args.threshold, geomean_threshold=args.geomean_threshold, alpha=args.alpha)
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
        intro.append("settings: not recorded in the lines of BASE or NEW (older lines)")
    else:
        intro.append(f"{len(settings)} settings differ between BASE and NEW" + (
            ": " + ", ".join(d.name for d in settings) if settings else ""))
        tables.append(settings_table(settings))
    print("\n".join(intro) + "\n")
    print(render_tables(tables), end="")
    if args.markdown:
        _write(args.markdown, render_markdown("Comparison", intro, tables))
    return EXIT_REGRESSED if result.regressed else EXIT_OK


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
        measured = load(args.results, run=args.run, engine=engine)
        reference = load([args.reference], run=args.reference_run, engine=engine)
    result = score(measured.records, reference.records)
    print(f"score: {result.score:.1f} over {result.experiments} experiments (reference = 1000)")
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m reports.cli report|compare|score ...` (the runner's CLI dispatches the same)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m reports.cli {{{','.join(COMMANDS)}}} ...", file=sys.stderr)
        return EXIT_BAD_INPUT
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
