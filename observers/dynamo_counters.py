"""Dynamo's counters (child side): a summary always, the full counters on request.

All of it goes into the line's `summary`. The graph summary, recorded for every dynamo
stack: `dynamo_graph_count` (distinct frames dynamo compiled into a graph: the graphs one
iteration runs), `dynamo_unique_graphs` (graphs handed to the backend, recompilations
included), `dynamo_recompiles`, `dynamo_graph_breaks` and `dynamo_graph_break_reasons`
(first line of each reason: count).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Optional

from backends.base import DYNAMO_GRAPHS
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import DYNAMO_COUNTERS_FILE, RUN_DIR_PREFIX, run_dir

log = logging.getLogger(__name__)

REASON_CHARS = 300


def counters_snapshot() -> dict[str, dict[str, int]]:
    """A plain copy of torch._dynamo.utils.counters (category -> name -> count)."""
    from torch._dynamo.utils import counters

    return {category: {str(k): int(v) for k, v in values.items()}
            for category, values in counters.items()}


def counters_change(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
                    ) -> dict[str, dict[str, int]]:
    """Counts that grew from `before` to `after`, by how much."""
    change: dict[str, dict[str, int]] = {}
    for category, values in after.items():
        grown = {name: count - before.get(category, {}).get(name, 0)
                 for name, count in values.items()
                 if count != before.get(category, {}).get(name, 0)}
        if grown:
            change[category] = grown
    return change


def short_reason(reason: str) -> str:
    """The first line of a graph-break reason, bounded."""
    first = reason.strip().splitlines()[0] if reason.strip() else "(no reason given)"
    return first[:REASON_CHARS]


def compiled_frames() -> tuple[int, int]:
    """(distinct frames compiled into a graph, recompilations) from dynamo's metrics."""
    from torch._dynamo.utils import get_compilation_metrics

    frames = set()
    recompiles = 0
    for metrics in get_compilation_metrics():
        if getattr(metrics, "recompile_reason", None):
            recompiles += 1
        if getattr(metrics, "fail_type", None) or not getattr(metrics, "graph_op_count", 0):
            continue
        frames.add((metrics.co_filename, metrics.co_firstlineno, metrics.co_name))
    return len(frames), recompiles


def summary(snapshot: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The counts every dynamo line carries."""
    breaks = snapshot.get("graph_break", {})
    reasons: dict[str, int] = {}
    for reason, count in breaks.items():
        key = short_reason(reason)
        reasons[key] = reasons.get(key, 0) + count
    graph_count, recompiles = compiled_frames()
    return {
        "dynamo_graph_count": graph_count,
        "dynamo_unique_graphs": snapshot.get("stats", {}).get("unique_graphs", 0),
        "dynamo_recompiles": recompiles,
        "dynamo_graph_breaks": sum(breaks.values()),
        "dynamo_graph_break_reasons": reasons,
    }


def compile_times() -> dict[str, float]:
    """Seconds dynamo spent in each of its compile phases, summed over compilations."""
    from torch._dynamo.utils import compile_times as dynamo_compile_times

    names, values = dynamo_compile_times(repr="csv")
    totals = {}
    for name, text in zip(names, values):
        totals[str(name)] = sum(float(v) for v in str(text).split(",") if v.strip())
    return totals


class DynamoCountersObserver(RunObserver):
    """Dynamo's counters per run (on request), dumped per timed run (on request), and the
    graph summary of the whole experiment (always).

    With --collect-dynamo-counters the summary's `dynamo_counters` is a list with one entry
    per run, like PyTorch/XLA's runner (which clears the counters before each run): the
    counters of the warm-up first (compilation shows there) when there was one, then what
    each timed run added.
    """

    def __init__(self, experiment_dir: Path, collect: bool, dump: bool, warmup: int = 0) -> None:
        self.experiment_dir = experiment_dir
        self.collect = collect
        self.dump = dump
        self.warmup = warmup
        self._before_run: dict[str, dict[str, int]] = {}
        self._last: Optional[dict[str, dict[str, int]]] = None
        self._per_run: list[dict[str, dict[str, int]]] = []

    def before_timed_run(self, index: int) -> None:
        self._before_run = counters_snapshot()
        if index == 0 and self.collect and self.warmup:
            self._per_run.append(self._before_run)  # the warm-up's counters

    def after_timed_run(self, index: int) -> None:
        snapshot = counters_snapshot()
        changed = counters_change(self._before_run, snapshot)
        if self.dump:
            record = {"run": index, "counters": snapshot, "changed_in_run": changed}
            path = run_dir(self.experiment_dir, index) / DYNAMO_COUNTERS_FILE
            path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        if self.collect:
            self._per_run.append(changed)
        self._last = snapshot

    def summary(self) -> dict[str, Any]:
        snapshot = self._last if self._last is not None else counters_snapshot()
        values = summary(snapshot)
        if self.collect:
            values["dynamo_counters"] = list(self._per_run)
            values["dynamo_compile_times_s"] = compile_times()
        return values


class DynamoCounters(Observer):
    name = "dynamo_counters"
    order = 10
    flags = (
        Flag("--collect-dynamo-counters",
             "dynamo's counters, one entry per run (the warm-up's first), and compile-phase "
             "times in the line's summary (dynamo stacks)"),
        Flag("--dump-dynamo-counters",
             f"dynamo's counters as {RUN_DIR_PREFIX}N/{DYNAMO_COUNTERS_FILE} per timed run"),
    )
    feature = DYNAMO_GRAPHS
    elsewhere = "dynamo counters exist only where dynamo compiles (--dynamo=...)"
    files = (f"{RUN_DIR_PREFIX}<i>/{DYNAMO_COUNTERS_FILE}",)
    always = True  # the graph summary goes into every line of a dynamo stack

    def create(self, context: ObserverContext) -> RunObserver:
        return DynamoCountersObserver(
            context.folder, bool(context.settings.observing("collect_dynamo_counters")),
            bool(context.settings.observing("dump_dynamo_counters")), context.settings.warmup)


OBSERVER = DynamoCounters()
