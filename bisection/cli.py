"""`experiment-runner bisect`: the command line, its console output and its exit status.

    experiment-runner bisect --repo PATH --good REV --bad REV [--setup CMD] -- SWEEP FLAGS
    experiment-runner bisect --package NAME --versions V1,V2,... -- SWEEP FLAGS

Exit 0 with the first bad point found; 1 when the answer is inconclusive (skipped points
between the last good and the first bad, or ends that do not differ); 2 on bad input;
130 when stopped (the same command resumes).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional, Sequence

from bisection.driver import POINT_PROCESSES, Bisection, BisectError, Outcome, Settings
from bisection.judge import METRICS, Judge
from bisection.measure import RunnerMeasurer
from bisection.placement import point_slots
from bisection.points import (VersionEnvironments, Worktrees, commit_points,
                              environments_folder, version_points)
from core.files.bisect_log import log_path
from reports.analyse.compare import DEFAULT_ALPHA, DEFAULT_THRESHOLD
from reports.cli import _fraction as fraction
from reports.analyse.bisection import bisect_steps
from reports.render.bisect_table import bisect_table
from reports.render.render_text import render_tables
from runner.plan.parser import device_list

EXIT_FOUND, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 1, 2, 130
DEFAULT_OUTPUT = "bisect-output"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise BisectError(f"{self.prog}: {message}")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="experiment-runner bisect",
        description="Find the first bad commit or package version between a good one and a "
                    "bad one: each point is measured by a sweep of its own (the flags after "
                    "--) and judged against both ends as `compare` judges (docs/bisect.md).")
    commits = parser.add_argument_group("a range of commits")
    commits.add_argument("--repo", type=Path, help="the git repository whose commits are bisected")
    commits.add_argument("--good", help="a commit that is good (the range's start)")
    commits.add_argument("--bad", help="a commit that is bad (the range's end)")
    commits.add_argument("--setup", help="a shell command run in each commit's worktree (or "
                         "each version's environment) before it is measured, say "
                         "'pip install -e .'; a point whose setup fails is skipped")
    versions = parser.add_argument_group("a range of package versions")
    versions.add_argument("--package", help="the package whose versions are bisected")
    versions.add_argument("--versions", help="its versions in order, good first, comma-separated")
    judging = parser.add_argument_group("judging")
    judging.add_argument("--metric", choices=sorted(METRICS), default="latency",
                         help="the figure judged (default latency: the median time per iteration)")
    judging.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD,
                         help="a change that counts, as compare's: 7%% or 0.07 (default 7%%)")
    judging.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                         help="significance level of the permutation test (default 0.05)")
    judging.add_argument("--remeasure", type=_count, default=1,
                         help="times an inconclusive point is measured again, each with twice "
                              "the processes, before it is skipped (default 1)")
    judging.add_argument("--processes", type=_positive, default=POINT_PROCESSES,
                         help="timing processes of each point's sweep (default "
                              f"{POINT_PROCESSES}, on the CPU too: one process's figure is "
                              "one layout of the process and one speed of its core)")
    judging.add_argument("--trust-flagged", action="store_true",
                         help="judge lines flagged unreliable (contention, runs that vary) by "
                              "the permutation test alone, as on a shared machine where every "
                              "line is flagged (docs/bisect.md: how far to trust it)")
    parser.add_argument("--jobs", type=_positive, default=1,
                        help="points measured at once (k-section; default 1: bisection); on a "
                             "host of several GPUs each gets a GPU and a share of the cores of "
                             "its own (docs/bisect.md)")
    parser.add_argument("--devices", type=device_list, default=[],
                        help="comma-separated CUDA devices (as CUDA_VISIBLE_DEVICES names them) "
                             "the points measured at once spread over, the i-th point of a "
                             "round on the i-th (round robin); default: the GPUs the runner "
                             "sees")
    parser.add_argument("--output-dirname", type=Path, default=Path(DEFAULT_OUTPUT),
                        help="the results file, the bisect log and the points' worktrees go "
                             f"here (default {DEFAULT_OUTPUT}); the same command again resumes")
    parser.add_argument("--keep-trees", action="store_true",
                        help="keep the commits' worktrees when the bisection ends")
    parser.add_argument("sweep", nargs=argparse.REMAINDER,
                        help="after --: the sweep's flags (-k MODEL --accelerator cpu ...); "
                             "{tree} in one is replaced by the point's worktree")
    return parser


def _check(args: argparse.Namespace) -> None:
    by_commits = any(v is not None for v in (args.repo, args.good, args.bad))
    by_versions = any(v is not None for v in (args.package, args.versions))
    if by_commits == by_versions:
        raise BisectError("give either --repo, --good and --bad (commits) or --package and "
                          "--versions (versions)")
    if by_commits and None in (args.repo, args.good, args.bad):
        raise BisectError("bisecting commits needs --repo, --good and --bad")
    if by_versions and None in (args.package, args.versions):
        raise BisectError("bisecting versions needs --package and --versions")
    if not 0 < args.alpha <= 1:
        raise BisectError(f"--alpha {args.alpha!r} must be in (0, 1]")
    if args.sweep and args.sweep[0] == "--":
        args.sweep = args.sweep[1:]
    for flag in ("--output-dirname", "--output-basename", "--point", "--no-resume"):
        if any(a == flag or a.startswith(flag + "=") for a in args.sweep):
            raise BisectError(f"the sweep flag {flag} is the bisection's own: give "
                              "--output-dirname before --")


def describe(outcome: Outcome) -> str:
    """The answer a person reads: the first bad point, the last good one, the skipped."""
    if outcome.answer is None:
        return f"inconclusive: {outcome.problem}"
    points, answer = outcome.points, outcome.answer
    first_bad, last_good = points[answer.first_bad], points[answer.last_good]
    lines = []
    if answer.exact:
        lines.append(f"first bad: {first_bad.label} {first_bad.title}".rstrip())
    else:
        candidates = [points[i] for i in (*answer.skipped_between, answer.first_bad)]
        lines.append("inconclusive: the first bad point is one of "
                     + ", ".join(p.label for p in candidates))
        for index in answer.skipped_between:
            label = points[index].label
            lines.append(f"  skipped {label}: {outcome.reasons.get(label, '')}")
        lines.append(f"first bad measured: {first_bad.label} {first_bad.title}".rstrip())
    lines.append(f"  {outcome.reasons.get(first_bad.label, '')}")
    lines.append(f"last good: {last_good.label} {last_good.title}".rstrip())
    others = [p.label for p in points if outcome.verdicts.get(p.label) == "skipped"
              and points.index(p) not in answer.skipped_between]
    if others:
        lines.append("skipped elsewhere: " + ", ".join(
            f"{label} ({outcome.reasons.get(label, '')})" for label in others))
    if answer.contradictions:
        lines.append("note: good above the first bad point, as noise or a change undone can "
                     "make it: " + ", ".join(points[i].label for i in answer.contradictions))
    lines.append(f"{outcome.rounds} round(s)")
    return "\n".join(lines)


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    _check(args)
    output_dir = args.output_dirname.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    if args.repo is not None:
        repo = args.repo.resolve()
        points = commit_points(repo, args.good, args.bad)
        places = Worktrees(repo, output_dir / "bisect-trees", args.setup)
        kind = "commits"
    else:
        versions = [v.strip() for v in args.versions.split(",") if v.strip()]
        points = version_points(args.package, versions)
        places = VersionEnvironments(args.package, environments_folder(), args.setup)
        kind = "versions"
    slots = point_slots(args.jobs, args.devices, args.sweep)
    measurer = RunnerMeasurer(output_dir, args.sweep, places, jobs=args.jobs, slots=slots)
    judge = Judge(METRICS[args.metric], args.threshold, args.alpha, args.trust_flagged)
    settings = Settings(args.jobs, args.processes, args.remeasure)
    bisection = Bisection(points, measurer, judge, log_path(measurer.results_path), settings,
                          kind, say=lambda text: print(text, flush=True))
    print(f"bisecting {len(points)} {kind} from {points[0].label} (good) to {points[-1].label} "
          f"(bad), {args.jobs} at once; results in {measurer.results_path}", flush=True)
    if slots:
        print("points at once on: " + "; ".join(f"{slot.index + 1}: {slot.describe()}"
                                                for slot in slots), flush=True)
    try:
        outcome = bisection.run()
    except KeyboardInterrupt:
        print(f"\nstopped: every step so far is in {log_path(measurer.results_path)}; run the "
              "same command again to resume", file=sys.stderr)
        return EXIT_STOPPED
    steps = bisect_steps(log_path(measurer.results_path))
    if steps is not None:
        print()
        print(render_tables([bisect_table(steps)]), end="")
    print()
    print(describe(outcome))
    if isinstance(places, Worktrees) and not args.keep_trees:
        places.remove()
    return EXIT_FOUND if outcome.answer is not None and outcome.answer.exact else EXIT_INCONCLUSIVE


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`experiment-runner bisect ...`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        return run(argv)
    except BisectError as error:
        print(f"experiment-runner bisect: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SystemExit as done:  # --help
        return done.code if isinstance(done.code, int) else EXIT_FOUND


if __name__ == "__main__":
    raise SystemExit(main())
