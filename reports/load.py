"""Read results files into normalised records, one per experiment.

A results file may hold several runs of the same experiment, failed and skipped lines,
lines missing metrics and keys we do not know. Loading keeps, per fingerprint, the line of
the latest run (or only lines of the run asked for) and turns it into a `Record` whose
fields are always present (None where the line had nothing usable).
"""

from __future__ import annotations

import contextlib
import gc
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from core.config import DEFAULT_MATMUL_PRECISION
from core.results_file import BadLine, ResultsFileError, read_results
from core.schema import (
    VERIFICATION_FAILED,
    Status,
    error_of,
    fingerprint_of,
    finite_number,
    has_timings,
    requested_batch_size,
    stack_label_of,
    status_of,
    summary_value,
    text,
    timed_values,
    verification_code_of,
)
from reports.errors import ReportError
from reports.stats import Interval, finite_numbers, median, median_interval

log = logging.getLogger(__name__)

_EXPERIMENT_DEFAULTS = {
    "matmul_precision": DEFAULT_MATMUL_PRECISION,
    "disable_tf32": False,
    "enable_functionalization": False,
    "optimizer": None,
    "amp_dtype": None,
}


@dataclass(frozen=True, order=True)
class ConfigKey:
    """What groups experiments into one configuration (a column of the dashboard)."""

    accelerator: str
    stack: str
    test: str
    precision: str
    batch_size: str
    xla_flags: str = ""
    extras: str = ""

    @property
    def label(self) -> str:
        """Readable name, e.g. 'cpu inductor eval fp32' (+ batch size, flags, extras)."""
        parts = [self.accelerator, self.stack, self.test, self.precision]
        if self.batch_size:
            parts.append(f"bs={self.batch_size}")
        if self.xla_flags:
            parts.append(f"flags={self.xla_flags}")
        if self.extras:
            parts.append(self.extras)
        return " ".join(parts)

    def baseline_key(self, baseline_stack: str) -> "ConfigKey":
        """The key of the configuration this one is compared against."""
        return ConfigKey(self.accelerator, baseline_stack, self.test, self.precision, self.batch_size, "", self.extras)


@dataclass
class Record:
    """One experiment (model x configuration) as the report sees it."""

    suite: str
    model: str
    config: ConfigKey
    fingerprint: str
    status: str
    verification_code: str
    run_id: str
    timestamp: float
    per_iter_times: list[float] = field(default_factory=list)
    median_time: Optional[float] = None
    interval: Optional[Interval] = None
    cold_start_time: Optional[float] = None
    compile_time: Optional[float] = None
    peak_memory: Optional[int] = None
    memory_kind: Optional[str] = None
    error: str = ""
    skip_reason: str = ""
    accelerator_model: str = ""

    @property
    def model_label(self) -> str:
        return f"{self.suite}/{self.model}" if self.suite else self.model

    @property
    def ran(self) -> bool:
        """The experiment ran to the end and has timings."""
        return self.status == Status.OK and self.median_time is not None and self.median_time > 0

    @property
    def verification_failed(self) -> bool:
        return self.verification_code in VERIFICATION_FAILED

    @property
    def passed(self) -> bool:
        """Ran, and was not found wrong by the verifier (if the verifier ran)."""
        return self.ran and not self.verification_failed


@dataclass
class RunInfo:
    """One runner invocation seen in the files."""

    run_id: str
    lines: int
    first_timestamp: float
    last_timestamp: float


@dataclass
class Loaded:
    """What loading found: the records and everything that was set aside."""

    records: list[Record]
    bad_lines: list[BadLine]
    runs: list[RunInfo]
    total_lines: int
    superseded: int
    unusable: list[str]


def config_key(experiment: dict[str, Any], stack: str) -> ConfigKey:
    """The configuration key of an experiment dict (missing keys read as unknown)."""
    extras = []
    for name, default in _EXPERIMENT_DEFAULTS.items():
        value = experiment.get(name, default)
        if value != default and value is not None:
            extras.append(f"{name}={value}")
    batch = requested_batch_size(experiment)  # the batch size used varies by model
    return ConfigKey(
        accelerator=text(experiment.get("accelerator"), "?"),
        stack=stack,
        test=text(experiment.get("test"), "?"),
        precision=text(experiment.get("precision"), "fp32"),
        batch_size="" if batch is None else text(batch),
        xla_flags=text(experiment.get("xla_flags")),
        extras=" ".join(extras),
    )


def record_from_line(line: dict[str, Any]) -> Optional[Record]:
    """Normalise one results line; None when it names no model or experiment."""
    model = line.get("model")
    experiment = line.get("experiment")
    if not isinstance(model, dict) or not isinstance(experiment, dict) or not model.get("model_name"):
        return None
    times = finite_numbers(timed_values(line, "per_iter_time"))  # without the cold start
    med = median(times)
    cold = finite_number(summary_value(line, "cold_start_time"))
    compile_time = None
    if cold is not None:
        compile_time = max(0.0, cold - med) if med is not None else cold
    peak, kind = None, None
    for key, name in (("peak_device_memory_bytes", "device"), ("peak_host_memory_bytes", "host")):
        value = finite_number(summary_value(line, key))
        if value is not None and value > 0:
            peak, kind = int(value), name
            break
    status = status_of(line)
    return Record(
        suite=text(model.get("suite_name")),
        model=text(model.get("model_name")),
        config=config_key(experiment, stack_label_of(line)),
        fingerprint=fingerprint_of(line) or "",
        status=status,
        verification_code=verification_code_of(line),
        run_id=text(line.get("run_id")),
        timestamp=finite_number(line.get("timestamp")) or 0.0,
        per_iter_times=times,
        median_time=med,
        interval=median_interval(times),
        cold_start_time=cold,
        compile_time=compile_time,
        peak_memory=peak,
        memory_kind=kind,
        error=error_of(line),
        skip_reason=text(line.get("skip_reason")),
        accelerator_model=text(experiment.get("accelerator_model")),
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while parsing, restoring its previous state.

    Parsing creates hundreds of thousands of acyclic dicts and lists; the collector's scans
    of them would double the time of loading 100,000 lines and free nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_all(paths: Sequence[Path]) -> tuple[list[dict[str, Any]], list[BadLine]]:
    lines: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ReportError(f"results file {str(path)!r} does not exist")
        try:
            read = read_results(path)
        except ResultsFileError as error:
            raise ReportError(str(error)) from error
        except OSError as error:
            raise ReportError(f"cannot read results file {str(path)!r}: {error.strerror or error}") from error
        lines.extend(read.lines)
        bad.extend(read.bad_lines)
    return lines, bad


def _runs(stamps: list[tuple[str, float]]) -> list[RunInfo]:
    runs: dict[str, RunInfo] = {}
    for run_id, timestamp in stamps:
        info = runs.get(run_id)
        if info is None:
            runs[run_id] = RunInfo(run_id, 1, timestamp, timestamp)
        else:
            info.lines += 1
            info.first_timestamp = min(info.first_timestamp, timestamp)
            info.last_timestamp = max(info.last_timestamp, timestamp)
    return sorted(runs.values(), key=lambda r: (r.last_timestamp, r.run_id))


def _identity(line: dict[str, Any]) -> Optional[str]:
    """The key one experiment's lines share; None for a line naming no model or experiment."""
    model = line.get("model")
    if not isinstance(model, dict) or not isinstance(line.get("experiment"), dict) or not model.get("model_name"):
        return None
    return fingerprint_of(line) or repr((model, line["experiment"]))


def select_run(run: str, runs: list[RunInfo]) -> str:
    """The run id that `run` names: an exact id, a unique prefix, or 'latest'."""
    named = [r for r in runs if r.run_id]
    if not named:
        raise ReportError(f"--run {run!r}: the results hold no run ids")
    if run == "latest":
        return named[-1].run_id
    exact = [r.run_id for r in named if r.run_id == run]
    if exact:
        return exact[0]
    prefixed = [r.run_id for r in named if r.run_id.startswith(run)]
    if len(prefixed) == 1:
        return prefixed[0]
    known = ", ".join(r.run_id for r in named[-10:])
    if prefixed:
        raise ReportError(f"--run {run!r} is ambiguous: it starts {len(prefixed)} run ids ({', '.join(prefixed[:5])})")
    raise ReportError(f"--run {run!r} matches no run in the results; runs there: {known}")


def _with_earlier_timings(
    line: dict[str, Any], timed: Optional[tuple[float, dict[str, Any]]]
) -> dict[str, Any]:
    """A --verify-only line carries no timings: keep the latest timed line of the same
    experiment, with the newer verification code and reason."""
    if timed is None or has_timings(line) or line.get("status") != "ok":
        return line
    merged = dict(timed[1])
    for key in ("verification_code", "verification_reason", "verification_details"):
        if key in line:
            merged[key] = line[key]
    return merged


def load(paths: Sequence[Path], run: Optional[str] = None) -> Loaded:
    """Records of the given results files, one per experiment.

    Without `run`, each experiment's latest line (by timestamp) wins; with `run`, only that
    run's lines are used (the latest per experiment within it). A latest line from
    --verify-only lends its verification code to the latest timed line instead.
    """
    if not paths:
        raise ReportError("no results file given")
    with _collector_paused():
        return _load(paths, run)


def _load(paths: Sequence[Path], run: Optional[str]) -> Loaded:
    lines, bad = _read_all(paths)
    unusable: list[str] = []
    usable: list[tuple[str, str, float, dict[str, Any]]] = []
    for index, line in enumerate(lines):
        key = _identity(line)
        if key is None:
            unusable.append(f"valid line {index + 1} names no model or experiment")
            continue
        usable.append((key, text(line.get("run_id")), finite_number(line.get("timestamp")) or 0.0, line))
    runs = _runs([(run_id, stamp) for _, run_id, stamp, _ in usable])
    if run is not None:
        chosen = select_run(run, runs)
        usable = [item for item in usable if item[1] == chosen]
    latest: dict[str, tuple[float, dict[str, Any]]] = {}
    latest_timed: dict[str, tuple[float, dict[str, Any]]] = {}
    for key, _, stamp, line in usable:
        current = latest.get(key)
        if current is None or stamp >= current[0]:
            latest[key] = (stamp, line)
        if has_timings(line):
            current = latest_timed.get(key)
            if current is None or stamp >= current[0]:
                latest_timed[key] = (stamp, line)
    chosen_lines = [
        _with_earlier_timings(line, latest_timed.get(key)) for key, (_, line) in latest.items()
    ]
    records = [record for line in chosen_lines if (record := record_from_line(line)) is not None]
    records.sort(key=lambda r: (r.config, r.model_label))
    if unusable:
        log.warning("%d results lines name no model or experiment and were skipped", len(unusable))
    return Loaded(
        records=records,
        bad_lines=bad,
        runs=runs,
        total_lines=len(lines) + len(bad),
        superseded=len(usable) - len(records),
        unusable=unusable,
    )
