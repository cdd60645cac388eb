"""Read results files into normalised records, one per experiment.

The files are read by the columnar engine (`reports.read.engine`, DuckDB); what is selected from
them (each experiment's latest line, or the lines of one run) comes back as `Record`s whose
fields are always present (None where the line had nothing usable). Only the selected lines
ever become Python objects, so a year of nightly runs loads in seconds.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from functools import lru_cache, total_ordering
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from core.columns import baseline_values, config_columns, label_of
from core.files.results_file import BadLine
from core.schema import VERIFICATION_FAILED, Status, VerificationCode
from reports.read.columnar import Engine
from reports.read.engine import FileScan
from reports.errors import ReportError
from reports.stats import Interval, median_interval

log = logging.getLogger(__name__)

#: Codes with a verdict on the stack's output (the others: not verified).
VERDICT_CODES = frozenset({VerificationCode.PASS.value, *VERIFICATION_FAILED})


@total_ordering
class ConfigKey:
    """What groups experiments into one configuration (a column of the dashboard): the
    value of every configuration column (core.columns.config_columns), as named pairs in
    the columns' order, which is also how configurations sort.

    Made from values in the columns' order and/or by name (`ConfigKey("cpu", "inductor",
    "eval", "fp32", mode="cudagraphs")`); a column not given holds its default. Each
    column's value reads as an attribute (`key.stack`, `key.mode`).

    The batch size is not part of it: it is the model's (the line's batch size used), shown
    per experiment and matched against the baseline's.
    """

    __slots__ = ("values", "_label")

    def __init__(self, *values: str, **named: str) -> None:
        columns = config_columns()
        if len(values) == len(columns) and not named:
            found = tuple(values)
        else:
            if len(values) > len(columns):
                raise TypeError(f"ConfigKey takes at most {len(columns)} values, not {len(values)}")
            given = dict(zip((column.name for column in columns), values))
            unknown = set(named) - set(_column_index())
            if unknown or set(named) & set(given):
                raise TypeError(f"ConfigKey: unknown or repeated column(s) "
                                f"{sorted(unknown or set(named) & set(given))}")
            given.update(named)
            found = tuple(str(given.get(column.name, column.default)) for column in columns)
        object.__setattr__(self, "values", found)
        object.__setattr__(self, "_label", None)

    def __getattr__(self, name: str) -> str:
        index = _column_index().get(name)
        if index is None:
            raise AttributeError(f"ConfigKey has no column {name!r}")
        return self.values[index]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ConfigKey is immutable")

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """(column, value) in the columns' order."""
        return tuple(zip(_column_index(), self.values))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.pairs)

    def as_dict(self) -> dict[str, str]:
        return dict(zip(_column_index(), self.values))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigKey) and self.values == other.values

    def __lt__(self, other: "ConfigKey") -> bool:
        if not isinstance(other, ConfigKey):
            return NotImplemented
        return self.values < other.values

    def __hash__(self) -> int:
        return hash(self.values)

    def __repr__(self) -> str:
        return "ConfigKey(" + ", ".join(f"{name}={value!r}" for name, value in self.pairs) + ")"

    def __reduce__(self):
        return (_config_key, (self.pairs,))

    @property
    def label(self) -> str:
        """Readable name, e.g. 'cpu inductor eval fp32' (+ mode, flags, extras)."""
        if self._label is None:
            object.__setattr__(self, "_label", label_of(self.as_dict()))
        return self._label

    def baseline_key(self, baseline_stack: str) -> "ConfigKey":
        """The key of the configuration this one is compared against (core.columns): the
        baseline's stack, and what of this one the baseline shares."""
        return _baseline_key(self, baseline_stack)

    def is_baseline(self, baseline_stack: str) -> bool:
        """Whether this is a baseline configuration (its own baseline)."""
        return self == self.baseline_key(baseline_stack)


@lru_cache(maxsize=None)
def _column_index() -> dict[str, int]:
    """Each configuration column's place in ConfigKey.values."""
    return {column.name: index for index, column in enumerate(config_columns())}


# Each column reads as an attribute (a name ConfigKey already has reads through __getattr__).
for _name, _index in _column_index().items():
    if not hasattr(ConfigKey, _name):
        setattr(ConfigKey, _name, property(lambda self, at=_index: self.values[at],
                                           doc=f"The {_name} column's value."))


@lru_cache(maxsize=4096)
def _baseline_key(key: ConfigKey, baseline_stack: str) -> ConfigKey:
    return ConfigKey(**baseline_values(key.as_dict(), baseline_stack))


def _config_key(pairs: tuple[tuple[str, str], ...]) -> ConfigKey:
    return ConfigKey(**dict(pairs))


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
    batch_size: Optional[int] = None
    #: The experiment's identity in the reports: every identity field resolved (lines of
    #: any version), from reports.engine.
    key: int = 0
    eager_peak_device_memory: Optional[int] = None
    graph_count: Optional[float] = None
    unique_graphs: Optional[float] = None
    graph_breaks: Optional[float] = None
    unique_graph_breaks: Optional[int] = None
    calls_captured: Optional[float] = None
    paired_speedup: Optional[float] = None
    paired_p_value: Optional[float] = None
    paired_method: str = ""
    unreliable: bool = False
    unreliable_reason: str = ""
    #: Spread of the timing processes' medians ((max - min) / median), with several.
    process_spread: Optional[float] = None
    #: CUDA: most timed iterations had the device waiting for the host (docs/timing.md).
    host_bound: bool = False
    host_bound_fraction: Optional[float] = None
    #: How much slower than this host's usual figure the reference workload ran.
    slow_ratio: Optional[float] = None
    #: Achieved TFLOP/s (the line's own, else its FLOPs over its median), its fraction of the
    #: device's peak, or why there is no peak.
    tflops: Optional[float] = None
    peak_fraction: Optional[float] = None
    peak_note: str = ""
    #: FLOPs of one iteration (the line's workload.flops_per_iteration), when counted.
    flops_per_iteration: Optional[float] = None
    #: The line's id in the engine's `lines` (file index * ID_STRIDE + ordinal).
    line_id: Optional[int] = None

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

    @property
    def verified(self) -> bool:
        """Ran and the verifier gave a verdict (PASS, FAIL or EXCEPTION_RAISED)."""
        return self.status == Status.OK and self.verification_code in VERDICT_CODES

    @property
    def accurate(self) -> bool:
        """Passes the HUD's accuracy check: ran, verified, PASS."""
        return self.status == Status.OK and self.verification_code == VerificationCode.PASS


@dataclass
class RunInfo:
    """One runner invocation seen in the files."""

    run_id: str
    lines: int
    first_timestamp: float
    last_timestamp: float
    commands: list[str] = field(default_factory=list)
    environments: list[dict[str, Any]] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The run id with its date, e.g. 'a1b2c3d4e5f6 (2025-01-31 02:00)'."""
        name = self.run_id or "(no run id)"
        return f"{name} ({format_time(self.first_timestamp)})" if self.first_timestamp else name


@dataclass
class Loaded:
    """What loading found: the records and everything that was set aside."""

    records: list[Record]
    bad_lines: list[BadLine]
    runs: list[RunInfo]
    total_lines: int
    superseded: int
    unusable: list[str]
    #: The engine's file indices these records came from (for further queries).
    files: list[int] = field(default_factory=list)
    run: Optional[str] = None
    #: The records of the newest run's lines alone (`run` if given, else the last of
    #: `runs`), where they could be told from `records` without selecting them again.
    newest_records: Optional[list["Record"]] = None


def format_time(timestamp: float) -> str:
    if not timestamp:
        return "-"
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


#: The columns of a record after its configuration's: (column of the lines, Record field).
_RECORD_FIELDS = (
    ("suite", "suite"), ("model", "model"), ("fp", "fingerprint"), ("key", "key"),
    ("status", "status"), ("code", "verification_code"), ("run", "run_id"), ("fin", "timestamp"),
    ("times", "per_iter_times"), ("med", "median_time"), ("cold", "cold_start_time"),
    ("compile", "compile_time"), ("peak_dev", None), ("peak_host", None),
    ("eager_peak_dev", "eager_peak_device_memory"), ("error", "error"),
    ("skip_reason", "skip_reason"), ("accel_model", "accelerator_model"), ("bs", "batch_size"),
    ("graph_count", "graph_count"), ("unique_graphs", "unique_graphs"),
    ("graph_breaks", "graph_breaks"), ("unique_graph_breaks", "unique_graph_breaks"),
    ("calls_captured", "calls_captured"), ("paired", "paired_speedup"),
    ("paired_p", "paired_p_value"), ("paired_method", "paired_method"),
    ("unreliable", "unreliable"), ("unreliable_reason", "unreliable_reason"),
    ("process_spread", "process_spread"), ("host_bound", "host_bound"),
    ("host_bound_fraction", "host_bound_fraction"), ("slow_ratio", "slow_ratio"),
    ("tflops", "tflops"), ("peak_fraction", "peak_fraction"), ("peak_note", "peak_note"),
    ("flops", "flops_per_iteration"), ("id", "line_id"), ("n_times", None),
)


def record_columns() -> list[str]:
    """The columns of the lines a record is made from, in `record_from_row`'s order: the
    configuration's (core.columns), then the record's own."""
    return [column.name for column in config_columns()] + [name for name, _ in _RECORD_FIELDS]


def _int(value: Optional[float]) -> Optional[int]:
    return None if value is None else int(value)


#: Where each column of `_RECORD_FIELDS` sits after the configuration's, and the Record
#: fields given as they are.
_AT = {name: index for index, (name, _) in enumerate(_RECORD_FIELDS)}
_GIVEN = tuple((index, attribute) for index, (_, attribute) in enumerate(_RECORD_FIELDS)
               if attribute is not None)


def record_from_row(row: tuple) -> Record:
    """A record from a row of `record_columns()`."""
    width = len(row) - len(_RECORD_FIELDS)
    config = ConfigKey(*row[:width])
    values = row[width:]
    given = {attribute: values[index] for index, attribute in _GIVEN}
    times = list(values[_AT["times"]] or [])
    peak_dev, peak_host = values[_AT["peak_dev"]], values[_AT["peak_host"]]
    if peak_dev is not None:
        peak, kind = int(peak_dev), "device"
    elif peak_host is not None:
        peak, kind = int(peak_host), "host"
    else:
        peak, kind = None, None
    given.update(
        config=config, per_iter_times=times, interval=median_interval(times), peak_memory=peak,
        memory_kind=kind, eager_peak_device_memory=_int(values[_AT["eager_peak_dev"]]),
        unreliable=bool(values[_AT["unreliable"]]), host_bound=bool(values[_AT["host_bound"]]),
        peak_note=values[_AT["peak_note"]] or "")
    return Record(**given)


def _scope(files: Sequence[int], run: Optional[str]) -> tuple[str, list[Any]]:
    where = f"fi IN ({', '.join(str(int(f)) for f in files)})"
    params: list[Any] = []
    if run is not None:
        where += " AND run = ?"
        params.append(run)
    return where, params


def runs_of(engine: Engine, files: Sequence[int]) -> list[RunInfo]:
    """The runs in the given files, oldest first (by their last line)."""
    where, params = _scope(files, None)
    rows = engine.con.execute(
        f"SELECT run, count(*), min(ts), max(fin), list(DISTINCT fi ORDER BY fi), "
        f"list(DISTINCT accel_model ORDER BY accel_model) FILTER (WHERE accel_model <> '') "
        f"FROM lines WHERE {where} GROUP BY run ORDER BY max(fin), run", params).fetchall()
    runs = []
    for run, count, first, last, indices, devices in rows:
        info = RunInfo(run, count, first or 0.0, last or 0.0, devices=list(devices or []))
        for index in indices:
            scan = engine.files[index]
            info.files.append(str(scan.path))
            provenance = scan.provenance.get(run)
            if provenance is not None:
                if provenance.command and provenance.command not in info.commands:
                    info.commands.append(provenance.command)
                if provenance.environment and provenance.environment not in info.environments:
                    info.environments.append(provenance.environment)
        runs.append(info)
    return runs


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


def select_records(engine: Engine, files: Sequence[int], run: Optional[str] = None,
                   mark: Optional[str] = None) -> tuple[list[Record], int]:
    """Each experiment's latest line (within `run` if given) as records; and how many
    usable lines that scope holds. With `mark`, the picks note which experiments have
    lines in run `mark` (`newest_of`).

    A latest line from --verify-only (status ok, no timings) lends its verification code to
    the experiment's latest timed line instead.
    """
    where, params = _scope(files, run)
    # Which experiments have lines in run `mark` (for `newest_of`).
    marked = "bool_or(run = ?)" if mark is not None else "false"
    params = ([mark] if mark is not None else []) + params
    order = "(ts, fin, fi, ord)"  # compared field by field (a row, cheaper than a list)
    con = engine.con
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE picks AS SELECT key, count(*) AS n, max_by(id, {order}) AS pick, "
        f"max_by(id, {order}) FILTER (WHERE n_times > 0) AS timed, max_by(run, {order}) AS pick_run, "
        f"max_by(run, {order}) FILTER (WHERE n_times > 0) AS timed_run, {marked} AS in_run "
        f"FROM lines WHERE {where} GROUP BY key",
        params)
    usable = con.execute("SELECT COALESCE(sum(n), 0) FROM picks").fetchone()[0]
    engine.ensure_details(i for pair in con.execute("SELECT pick, timed FROM picks").fetchall() for i in pair)
    columns = record_columns()
    rows = con.execute(
        f"SELECT {', '.join(columns)}, picks.timed FROM lines JOIN details USING (id) "
        f"JOIN (SELECT pick, timed FROM picks) AS picks ON id = picks.pick").fetchall()
    records: list[Record] = []
    lend: dict[int, str] = {}
    for row in rows:
        *line, timed = row
        at = dict(zip(columns, line))
        identifier, n_times, status, code = at["id"], at["n_times"], at["status"], at["code"]
        if n_times == 0 and status == Status.OK and timed is not None and timed != identifier:
            lend[timed] = code
            continue
        records.append(record_from_row(tuple(line)))
    if lend:
        con.execute("CREATE OR REPLACE TEMP TABLE lent(id BIGINT, lent_code VARCHAR)")
        con.executemany("INSERT INTO lent VALUES (?, ?)", list(lend.items()))
        for row in con.execute(
                f"SELECT {', '.join(columns)}, lent_code FROM lines JOIN details USING (id) JOIN lent USING (id)").fetchall():
            *line, code = row
            record = record_from_row(tuple(line))
            record.verification_code = code
            records.append(record)
    records.sort(key=lambda r: (r.config, r.model_label, r.batch_size or 0))
    return records, int(usable)


def newest_of(engine: Engine, records: list[Record], run: str) -> Optional[list[Record]]:
    """What `select_records(engine, files, run)` gives, taken from `records` (the last
    `select_records`, over every run, told to mark the lines of `run`) where it can be: the records whose line, and latest
    timed line, are of `run`. None where an experiment has lines in `run` that are not its
    latest (then only selecting them again tells)."""
    rows = engine.con.execute(
        "SELECT key, pick_run = ? AND (timed_run IS NULL OR timed_run = ?) FROM picks WHERE in_run",
        [run, run]).fetchall()
    if not all(same for _, same in rows):
        return None
    keys = {key for key, _ in rows}
    return [record for record in records if record.key in keys]


def load_from(engine: Engine, scans: Sequence[FileScan], run: Optional[str] = None) -> Loaded:
    """Records of files already added to `engine`."""
    files = [engine.files.index(scan) for scan in scans]
    runs = runs_of(engine, files)
    chosen = select_run(run, runs) if run is not None else None
    # The report's latest changes: the newest run against the one before it.
    mark = runs[-1].run_id if chosen is None and len(runs) > 1 else None
    records, usable = select_records(engine, files, chosen, mark)
    newest = records if chosen is not None else (newest_of(engine, records, mark) if mark is not None else None)
    bad = [b for scan in scans for b in scan.bad_lines]
    unusable = [f"{scan.path} line {n} names no model or experiment" for scan in scans for n in scan.unusable]
    if unusable:
        log.warning("%d results lines name no model or experiment and were skipped", len(unusable))
    return Loaded(
        records=records,
        bad_lines=bad,
        runs=runs,
        total_lines=sum(scan.rows for scan in scans),
        superseded=usable - len(records),
        unusable=unusable,
        files=files,
        run=chosen,
        newest_records=newest,
    )


def load(paths: Sequence[Path], run: Optional[str] = None, *, engine: Optional[Engine] = None,
         cache_dir: Optional[Path] = None) -> Loaded:
    """Records of the given results files (or folders of them), one per experiment.

    Without `run`, each experiment's latest line (by timestamp, then finish time, then file
    order) wins; with `run`, only that run's lines are used. Pass an `engine` to keep
    querying the files afterwards (history, dashboard); without one, a private engine is
    opened and closed (and `cache_dir` says where its cache is; None: no cache).
    """
    if not paths:
        raise ReportError("no results file given")
    if engine is not None:
        return load_from(engine, engine.add(paths), run)
    with Engine(cache_dir) as private:
        return load_from(private, private.add(paths), run)
