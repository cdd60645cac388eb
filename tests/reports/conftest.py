"""Crafted results files for report tests, built with the runner's own line maker."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import pytest

import backends
from core.config import ExperimentConfig, ModelConfig, RunSettings, experiment_id
from core.files.bisect_log import append_entry, log_path
from core.files.results_file import append_line
from core.schema import ResultLine, Status, VerificationCode

STACKS = {
    "eager": dict(xla=None, dynamo=None, torch_xla2=None),
    "inductor": dict(xla=None, dynamo="inductor", torch_xla2=None),
    "aot_eager": dict(xla=None, dynamo="aot_eager", torch_xla2=None),
    "PJRT": dict(xla="PJRT", dynamo=None, torch_xla2=None),
    "PJRT+openxla": dict(xla="PJRT", dynamo="openxla", torch_xla2=None),
    "torchax:extract_jax": dict(xla=None, dynamo=None, torch_xla2="extract_jax"),
}


def craft_line(
    model: str,
    stack: str = "eager",
    *,
    times: Optional[list[float]] = None,
    cold_start: Optional[float] = None,
    peak_host: Optional[int] = None,
    peak_device: Optional[int] = None,
    status: str = "ok",
    code: str = "VERIFIER_SKIPPED",
    run_id: str = "run-1",
    timestamp: Optional[float] = None,
    accelerator: str = "cpu",
    test: str = "eval",
    precision: str = "fp32",
    batch_size: Optional[int] = None,
    error: Optional[str] = None,
    extra_metrics: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """One results line as the runner writes it; metrics left None are absent."""
    model_config = ModelConfig("builtin", model)
    # A line may hold values the runner never writes (other versions, hand edits): those are
    # written over a valid experiment's line.
    odd_accelerator = accelerator not in ("cpu", "cuda", "tpu")
    experiment = ExperimentConfig(
        accelerator="cpu" if odd_accelerator else accelerator, test=test, precision=precision,
        batch_size=batch_size, **STACKS[stack]
    )
    metrics: dict[str, Any] = {}
    if times is not None:
        metrics["per_iter_time"] = list(times)
        metrics["total_time"] = list(times)
    if cold_start is not None:
        metrics["cold_start_time"] = cold_start
    if peak_host is not None:
        metrics["peak_host_memory_bytes"] = peak_host
    if peak_device is not None:
        metrics["peak_device_memory_bytes"] = peak_device
    if error is not None:
        metrics["error"] = error
    metrics.update(extra_metrics or {})
    stack = backends.stack_for(experiment)
    experiment = stack.planned(experiment, {})
    label = stack.label(experiment)
    line = ResultLine(
        model_config,
        experiment,
        RunSettings(repeat=len(times or []) or 1),
        metrics=metrics,
        status=Status(status),
        verification_code=VerificationCode(code),
        stack_label=label,
        run_id=run_id,
        experiment_id=experiment_id(model_config, experiment, label),
    ).to_dict()
    if odd_accelerator:
        line["experiment"]["accelerator"] = accelerator
    if timestamp is not None:
        line["timestamp"] = timestamp
    line["finished_at"] = line["timestamp"]  # crafted lines finish as their sweep starts
    return line


BISECT_EXPERIMENT = "builtin/mlp cpu eager eval fp32"


def write_bisect_log(results: Path) -> Path:
    """A bisection over seven commits c0..c6 logged beside `results`, as the bisect command logs
    it: the ends good and bad, c3 good, c5 bad, c4 inconclusive then skipped; c1 and c2 never
    measured. The answer: first bad c5, last good c3, c4 skipped between them."""
    path = log_path(results)
    labels = [f"c{i}" for i in range(7)]

    def verdict(point: str, verdict: str, value: float, round_number: int, attempt: int = 0) -> None:
        append_entry(path, {"event": "verdict", "point": point, "round": round_number, "attempt": attempt,
                            "verdict": verdict, "reason": f"{point} is {verdict}",
                            "figures": [{"experiment": BISECT_EXPERIMENT, "value": value, "low": value * 0.98,
                                         "high": value * 1.02, "status": "ok"}]})

    append_entry(path, {"event": "start", "version": 1, "kind": "commits", "points": labels,
                        "refs": labels, "titles": [f"commit {i}" for i in range(7)],
                        "metric": "latency", "threshold": 0.1})
    append_entry(path, {"event": "round", "round": 1, "points": ["c0", "c6"]})
    verdict("c0", "good", 0.010, 1)
    verdict("c6", "bad", 0.013, 1)
    append_entry(path, {"event": "round", "round": 2, "points": ["c3"]})
    verdict("c3", "good", 0.0101, 2)
    append_entry(path, {"event": "round", "round": 3, "points": ["c4", "c5"]})
    verdict("c4", "inconclusive", 0.0115, 3)
    verdict("c5", "bad", 0.0131, 3)
    verdict("c4", "skipped", 0.0116, 3, attempt=1)
    append_entry(path, {"event": "answer", "first_bad": "c5", "last_good": "c3", "skipped_between": ["c4"],
                        "contradictions": [], "rounds": 3, "problem": ""})
    return path


@pytest.fixture
def write_results(tmp_path: Path) -> Callable[..., Path]:
    """Write lines (dicts, or raw strings for corrupted lines) to a new results file."""
    counter = {"n": 0}

    def write(lines: list[Any], name: Optional[str] = None) -> Path:
        counter["n"] += 1
        path = tmp_path / (name or f"results{counter['n']}.jsonl")
        for line in lines:
            if isinstance(line, str):
                with open(path, "a", encoding="utf-8") as raw:
                    raw.write(line + "\n")
            else:
                append_line(path, line)
        return path

    return write


@pytest.fixture(autouse=True)
def report_cache(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own report cache folder (never the user's ~/.cache)."""
    folder = tmp_path_factory.mktemp("report-cache")
    monkeypatch.setenv("EXPERIMENT_RUNNER_CACHE_DIR", str(folder))
    return folder
