"""Read results files into normalised records, one per experiment.

The files are read by the columnar engine (`reports.read.columnar`, DuckDB); what is selected
from them (each experiment's latest line, or the lines of one run) comes back as `Record`s
(`reports.read.record`) whose fields are always present (None where the line had nothing
usable). Only the selected lines
ever become Python objects, so a year of nightly runs loads in seconds.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from core.files.results_file import BadLine
from core.schema import Status
from reports.errors import ReportError
from reports.read.columnar import Engine
from reports.read.engine import FileScan
# The record's types are part of this module's interface.
from reports.read.record import ConfigKey, Record, record_columns, record_from_row  # noqa: F401

log = logging.getLogger(__name__)


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
