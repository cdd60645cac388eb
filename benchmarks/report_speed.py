"""How long reports take on a large results file.

Generates N synthetic results lines (default 100,000: models x configurations x runs, with
some failed and some corrupted lines), then times loading, aggregation, every renderer,
the whole `report` command, `compare` and `score`.

    python benchmarks/report_speed.py [--lines 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonlines  # noqa: E402

from reports.aggregate import build_report  # noqa: E402
from reports.cli import compare_main, report_main, score_main  # noqa: E402
from reports.load import load  # noqa: E402
from reports.plots import render_plots  # noqa: E402
from reports.render_csv import render_csv  # noqa: E402
from reports.render_html import render_html  # noqa: E402
from reports.render_markdown import render_markdown  # noqa: E402
from reports.render_text import render_tables  # noqa: E402
from reports.tables import report_tables  # noqa: E402
from core.config import ExperimentConfig, ModelConfig, RunSettings  # noqa: E402
from core.schema import ResultLine, Status, VerificationCode  # noqa: E402

STACKS = [
    dict(xla=None, dynamo=None, torch_xla2=None),
    dict(xla=None, dynamo="inductor", torch_xla2=None),
    dict(xla=None, dynamo="cudagraphs", torch_xla2=None),
    dict(xla="PJRT", dynamo=None, torch_xla2=None),
    dict(xla="PJRT", dynamo="openxla", torch_xla2=None),
]
CONFIGS = [
    ExperimentConfig(accelerator="cuda", test=test, **stack) for test in ("eval", "train") for stack in STACKS
]
RUNS = 5


def generate(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    models = max(1, lines // (len(CONFIGS) * RUNS))
    settings = RunSettings(repeat=10)
    written = 0
    with jsonlines.open(path, mode="w", compact=True) as writer:
        for run in range(RUNS):
            for m in range(models):
                model = ModelConfig("synthetic", f"model_{m:05d}")
                base = random.Random(m).uniform(0.001, 0.5)  # the same model is as fast in every run
                for c, exp in enumerate(CONFIGS):
                    if written >= lines:
                        return
                    written += 1
                    if rng.random() < 0.005:
                        writer._fp.write('{"model": {"suite_name": "synthetic", "model_na\n')
                        continue
                    failed = c > 0 and rng.random() < 0.03
                    scale = base / (1 + c * 0.2) * (1 + 0.05 * run)
                    metrics = {"error": "RuntimeError: synthetic"} if failed else {
                        "per_iter_time": [scale * rng.uniform(0.95, 1.05) for _ in range(10)],
                        "cold_start_time": scale * 5 + (c * 3.0),
                        "peak_device_memory_bytes": int(2**30 * rng.uniform(0.5, 2)),
                    }
                    line = ResultLine(
                        model, exp, settings, metrics=metrics,
                        status=Status.FAILED if failed else Status.OK,
                        verification_code=(VerificationCode.VERIFIER_DIDNT_RUN if failed
                                           else VerificationCode.PASS),
                        run_id=f"run-{run}").to_dict()
                    line["timestamp"] = 1_000_000.0 + run * 10_000 + m
                    writer.write(line)


def timed(label: str, function):
    start = time.perf_counter()
    value = function()
    print(f"{label:<34} {time.perf_counter() - start:7.2f} s")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, default=None, help="write files here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "results.jsonl"
        timed(f"generate {args.lines} lines", lambda: generate(path, args.lines))
        print(f"{'file size':<34} {path.stat().st_size / 2**20:7.1f} MiB")
        loaded = timed("load (latest run per experiment)", lambda: load([path]))
        print(f"{'experiments / bad lines':<34} {len(loaded.records)} / {len(loaded.bad_lines)}")
        report = timed("aggregate", lambda: build_report(loaded.records))
        tables = timed("tables", lambda: report_tables(report))
        timed("render text", lambda: render_tables(tables))
        timed("render CSV", lambda: render_csv(report))
        timed("render Markdown", lambda: render_markdown("r", [], tables))
        plots = timed("plots (4 PNG)", lambda: render_plots(report))
        timed("render HTML", lambda: render_html("r", [], tables, plots))
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            timed_total = time.perf_counter()
            code = report_main([str(path), "--output-dir", str(folder / "report")])
            total = time.perf_counter() - timed_total
            start = time.perf_counter()
            compare_code = compare_main([str(path), str(path), "--base-run", "run-0", "--new-run", "run-4"])
            compare_time = time.perf_counter() - start
            start = time.perf_counter()
            score_code = score_main([str(path), "--reference", str(path), "--reference-run", "run-0"])
            score_time = time.perf_counter() - start
        print(f"{'report command, all outputs':<34} {total:7.2f} s (exit {code})")
        print(f"{'compare run-0 vs run-4':<34} {compare_time:7.2f} s (exit {compare_code})")
        print(f"{'score vs run-0':<34} {score_time:7.2f} s (exit {score_code})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
