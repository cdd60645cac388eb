"""Fixtures for the XLA stack tests: a real sweep into a tmp folder, its lines parsed."""

from __future__ import annotations

from typing import Any, Callable

import pytest

#: Timed runs short enough for a 2-core CI machine.
FAST = ("--accelerator=cpu", "--repeat=2", "--warmup=1", "--suite-name=builtin")
#: Entries of each per-run list with FAST: the cold-start run, then the 2 timed runs.
RUNS = 3


def describe_failures(lines: list[dict[str, Any]]) -> str:
    return "\n\n".join(
        f"{line['model']['model_name']} {line['experiment']}: {line['metrics'].get('error', '')[-1500:]}"
        for line in lines
        if line.get("status") != "ok"
    )


@pytest.fixture
def sweep(run_cli) -> Callable[..., list[dict[str, Any]]]:
    """Run `experiment_runner.py` with FAST flags plus ARGS; return its results lines."""

    def run(*args: str, output_dir=None) -> list[dict[str, Any]]:
        completed = run_cli(*FAST, *args, output_dir=output_dir)
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.lines()

    return run


def by_key(lines: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Lines keyed by (model name, test)."""
    return {(line["model"]["model_name"], line["experiment"]["test"]): line for line in lines}


def assert_per_run(metrics: dict[str, Any], names: tuple[str, ...], runs: int) -> None:
    """Each named metric is a list with one number per run (the cold-start run first)."""
    for name in names:
        assert name in metrics, f"{name} missing from {sorted(metrics)}"
        values = metrics[name]
        assert isinstance(values, list) and len(values) == runs, (name, values)
        assert all(isinstance(v, (int, float)) and v >= 0 for v in values), (name, values)
