"""Results files as one DuckDB table of normalised lines: the reports' columnar engine.

DuckDB's JSON reader parses each file (`read_ndjson`, typed columns, `records=true`) into a
table with one row per non-blank line, in file order. A line that is not valid JSON, or not
a JSON object, comes back as a row of NULLs; so does a valid object holding none of the keys
read. Those rows, and the lines naming no model or experiment, are set aside. Meanwhile a
thread indexes every newline of the file (numpy, one block at a time: `index_newlines`), so
that their line numbers and texts (and, for the first line of each run, the command and
environment: the provenance) are found without parsing anything else in Python.

A file read for the cache keeps every normalised column. Read without it (`--no-cache`),
only the columns every line needs are kept (`LINE_COLUMNS`: about a sixth less work over a
million lines); the details of the few lines selected (`DETAIL_COLUMNS`: per-run times,
error, dynamo figures...) are parsed again from their text by the same SQL
(`reports.read.columnar.Engine.ensure_details`).

Every figure is read tolerantly, as `core.schema` does: a whole-experiment figure from the
line's `summary`, else from `metrics` (the layout before `summary`); values of the wrong
type read as missing (numbers written as strings are read as numbers).

`reports.read.cache` keeps the normalised rows of each file as Parquet, so that a later read only
parses what was appended since; `reports.read.columnar.Engine` holds the connection and the
`lines` view over every file read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from core.columns import LABELS_COLUMN, STACK_COLUMN, ConfigColumn, config_columns
from core.fields import EXPERIMENT, MODEL, SCHEMA_VERSION as LINE_SCHEMA_VERSION, Field, identity_fields
from core.config import unreadable_identity
from core.files.results_file import (MAX_SCHEMA_VERSION, TIMESTAMP_KEYS, TIMESTAMP_RANGE, BadLine,
                                     loads_line, shape_problem)
from core.schema import VerificationCode
from reports.errors import ReportError, ScratchError

log = logging.getLogger(__name__)

#: Bumped whenever the normalised columns change meaning: older caches are rebuilt (and so
#: are those of another field table: `SCHEMA_VERSION` holds a digest of the columns' SQL).
_COLUMNS_VERSION = 8
#: Row ids are file index * ID_STRIDE + ordinal of the line in its file.
ID_STRIDE = 1 << 40
MEMORY_LIMIT = "1200MB"
#: The longest line the reports read (a results line is a few kilobytes); longer ones are
#: skipped with their line number, never held whole in memory.
MAX_LINE_BYTES = 64 * 2**20
#: Room DuckDB's reader needs beyond a line's own bytes.
_OBJECT_SLACK = 1 << 16

_D, _V, _B = "DOUBLE", "VARCHAR", "BOOLEAN"
#: The largest number a line's value is cast to an integer from: any larger one is bounded
#: first (a cast of 2**63 fails), or read as text.
MAX_CAST_INTEGER = 2**52
_FIGURES = {
    "cold_start_time": _D,
    "compile_time_s": _D,
    "peak_device_memory_bytes": _D,
    "peak_host_memory_bytes": _D,
    "eager_peak_device_memory_bytes": _D,
    "dynamo_graph_count": _D,
    "dynamo_unique_graphs": _D,
    "dynamo_graph_breaks": _D,
    "dynamo_graph_break_reasons": "MAP(VARCHAR, VARCHAR)",
    "calls_captured": _D,
    "dynamo_counters": "STRUCT(stats STRUCT(calls_captured DOUBLE))",
}

#: What DuckDB reads of each line (everything else is skipped by the parser's transform).
def _field_type(spec: Field) -> str:
    """How DuckDB reads a field of the table (core.fields): seeds as text (any size)."""
    if spec.kind is bool:
        return _B
    if spec.kind is dict:
        return "JSON"
    if spec.kind is int:
        return _V if spec.name == "seed" else _D
    return _V


READ_COLUMNS: dict[str, Any] = {
    # As JSON, so that a version that is no number ("abc") is seen, not read as NULL.
    "schema_version": "JSON",
    "model": {spec.key: _field_type(spec) for spec in identity_fields(MODEL)},
    "experiment": {
        **{spec.key: _field_type(spec) for spec in identity_fields(EXPERIMENT)},
        # Lines with requested_batch_size hold the batch size used here.
        "batch_size": _D, "accelerator_model": _V,
    },
    "seed": _V,
    "metrics": {"per_iter_time": "DOUBLE[]", "error": _V, **_FIGURES},
    "summary": {
        **_FIGURES,
        # How many entries lead the per-run lists for the cold-start run (core.schema).
        "cold_start_entries": _D,
        "paired_speedup": {"speedup": _D, "median": _D, "p_value": _D, "method": _V},
        # Several timing processes: each one's median per iteration (runner/run/process/processes.py).
        "processes": {"medians": "DOUBLE[]", "spread": _D},
        # Host-bound iterations (CUDA), slow periods, percent of peak (docs/timing.md).
        "host_bound": _B,
        "host_bound_fraction": _D,
        "slow_period": {"ratio": _D, "flagged": _B},
        "throughput": {"tflops": _D, "fraction_of_peak": _D, "no_peak_reason": _V},
        "unreliable": _B,
        "unreliable_reasons": "VARCHAR[]",
        "unreliable_reason": _V,
    },
    "status": _V,
    "verification_code": _V,
    "stack_label": _V,
    "fingerprint": _V,
    "run_id": _V,
    "timestamp": _D,
    "finished_at": _D,
    "skip_reason": _V,
    "batch_size_used": _D,
    # The workload signature: what was run (its FLOPs per iteration, where counted).
    "workload": {"flops_per_iteration": _D},
    # The settings in force (compare names those that differ: reports.analyse.settings_diff).
    "environment": {"torch_settings": "JSON"},
}
#: Read for the settings only: a line holding no other key read is set aside as before.
_SETTINGS_ONLY = ("environment",)


def _duck_type(spec: Any) -> str:
    if isinstance(spec, dict):
        return "STRUCT(" + ", ".join(f'"{name}" {_duck_type(sub)}' for name, sub in spec.items()) + ")"
    return spec


#: What only the details (`DETAIL_COLUMNS`) read: left out of a read without them.
_DETAIL_READ = (
    *(f"{side}.{name}" for side in ("metrics", "summary") for name in (
        "peak_host_memory_bytes", "dynamo_graph_count", "dynamo_unique_graphs", "dynamo_graph_breaks",
        "dynamo_graph_break_reasons", "calls_captured", "dynamo_counters")),
    "metrics.eager_peak_device_memory_bytes",
    "summary.paired_speedup.p_value", "summary.paired_speedup.method",
    "summary.unreliable", "summary.unreliable_reasons", "summary.unreliable_reason",
    "summary.processes.spread", "summary.host_bound", "summary.host_bound_fraction",
    "summary.slow_period", "summary.throughput",
)


def _without(spec: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """`spec` less the dotted paths."""
    pruned = {name: (dict(sub) if isinstance(sub, dict) else sub) for name, sub in spec.items()}
    for path in paths:
        *parents, leaf = path.split(".")
        node = pruned
        for parent in parents:
            node[parent] = dict(node[parent])
            node = node[parent]
        del node[leaf]
    return pruned


#: What DuckDB reads of each line when the details are not kept (the same top-level keys,
#: so a line is set aside exactly as with every column).
LINE_READ_COLUMNS = _without(READ_COLUMNS, _DETAIL_READ)
#: The same, less the settings (a read for `report` or `score`, which never name them).
_BARE_READ_COLUMNS = {name: spec for name, spec in LINE_READ_COLUMNS.items() if name not in _SETTINGS_ONLY}


def _columns_argument(columns: dict[str, Any]) -> str:
    return "{" + ", ".join(f"'{name}': '{_duck_type(spec)}'" for name, spec in columns.items()) + "}"


def _finite(expression: str) -> str:
    return f"(CASE WHEN isfinite({expression}) THEN {expression} END)"


def _positive(expression: str) -> str:
    return f"(CASE WHEN isfinite({expression}) AND {expression} > 0 THEN {expression} END)"


def _figure(name: str) -> str:
    """summary.NAME, else metrics.NAME (core.schema.summary_value), finite numbers only."""
    return f"COALESCE({_finite(f'summary.{name}')}, {_finite(f'metrics.{name}')})"


#: The cold-start entries to leave out of the steady state (core.schema.timed_values).
#: Bounded before the cast (2**63 or 1e19 leave nothing timed, as core.figures reads them).
_COLD_ENTRIES = ("(CASE WHEN isfinite(summary.cold_start_entries) AND summary.cold_start_entries > 0 "
                 f"THEN CAST(least(summary.cold_start_entries, {MAX_CAST_INTEGER}) AS BIGINT) ELSE 0 END)")


#: An experiment's samples: the medians of its timing processes where it had several (the
#: figure is their median, its interval theirs, and compare and the history test them),
#: else its timed runs' times per iteration.
#: A time a sample can be: above zero and below a day (hand-made lines hold -1e3, 0, 1e308).
_A_TIME = "lambda x: isfinite(x) AND x > 0 AND x < 86400"
_SAMPLES = (f"(CASE WHEN len(list_filter(summary.processes.medians, {_A_TIME})) >= 2 "
            f"THEN list_filter(summary.processes.medians, {_A_TIME}) "
            f"ELSE list_filter(list_slice(metrics.per_iter_time, 1 + {_COLD_ENTRIES}, "
            f"len(metrics.per_iter_time)), {_A_TIME}) END)")


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


#: A text as a quoted SQL literal (for a path in a statement that takes no parameter: COPY).
sql_text = _sql_text


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, dict)):
        return "'" + json.dumps(dict(value), sort_keys=True, separators=(",", ":")) + "'"
    return _sql_text(str(value))


#: Whether a line holds the requested batch size in `requested_batch_size` (the batch size
#: used in `batch_size`): lines of version 2, and lines of version 1 written since the line
#: had `finished_at`, which came in with it; older lines held the requested one in batch_size.
_HAS_REQUESTED = f"(TRY_CAST(schema_version AS DOUBLE) >= {LINE_SCHEMA_VERSION} OR finished_at IS NOT NULL)"


def _value(spec: Field) -> str:
    """The line's value of a field, NULL where the line lacks it."""
    if spec.name == "batch_size":
        return (f"(CASE WHEN {_HAS_REQUESTED} THEN experiment.{spec.key} "
                f"ELSE experiment.batch_size END)")
    if spec.name == "seed":
        return "COALESCE(experiment.seed, seed)"
    value = f"{spec.scope}.{spec.key}"
    if spec.kind is dict:
        return f"CAST({value} AS VARCHAR)"
    return value


def _resolved(spec: Field) -> str:
    """A field's value as the line's identity has it (core.config.line_identity): the
    value, else what lines lacking the field imply."""
    if spec.required:
        return _value(spec)
    implied = spec.implied_value
    if implied is None:
        return _value(spec)
    literal = _sql_text(str(implied)) if _field_type(spec) == _V else _sql_literal(implied)
    return f"COALESCE({_value(spec)}, {literal})"


def _label_part(spec: Field) -> str:
    """name=value where a reported field differs from today's default (NULL elsewhere)."""
    resolved = _resolved(spec)
    if spec.kind is bool:
        text = f"CASE WHEN {resolved} THEN 'True' ELSE 'False' END"
    elif spec.kind is int:
        text = f"CAST({resolved} AS VARCHAR)"
    else:
        text = resolved
    default = (_sql_text(str(spec.default)) if _field_type(spec) == _V and spec.default is not None
               else _sql_literal(spec.default))
    return (f"CASE WHEN {resolved} IS DISTINCT FROM {default} "
            f"THEN {_sql_text(spec.name + '=')} || {text} END")


def _text(spec: Field, expression: str) -> str:
    """A field's value as text, as core.columns.text writes it (NULL stays NULL)."""
    if spec.kind is bool:
        return f"(CASE WHEN {expression} THEN 'True' WHEN NOT {expression} THEN 'False' END)"
    if spec.kind is int and _field_type(spec) == _D:
        # Whole numbers as integers; one too large for that (1e19) as the number it is.
        return (f"(CASE WHEN abs({expression}) <= {MAX_CAST_INTEGER} "
                f"THEN CAST(CAST({expression} AS BIGINT) AS VARCHAR) "
                f"ELSE CAST({expression} AS VARCHAR) END)")
    if spec.kind is dict or _field_type(spec) != _V:
        return f"CAST({expression} AS VARCHAR)"
    return expression


#: The stack's label: the line's own, else its parts joined (eager without any).
_STACK = """CASE WHEN stack_label IS NOT NULL AND stack_label <> '' THEN stack_label
         WHEN experiment IS NULL THEN '?'
         ELSE COALESCE(NULLIF(concat_ws('+', NULLIF(experiment.xla, ''), NULLIF(experiment.dynamo, ''),
                                        NULLIF(experiment.torch_xla2, '')), ''), 'eager') END"""


def _config_column(column: ConfigColumn) -> str:
    """The SQL of one configuration column (core.columns): the stack's label, the label
    fields' parts, or a field's value as text (blank at its default where shown only when set)."""
    if column.name == STACK_COLUMN:
        return _STACK
    if column.name == LABELS_COLUMN:
        return f"""concat_ws(' ', {', '.join(_label_part(spec) for spec in column.fields)})"""
    (spec,) = column.fields
    if column.bare:
        return f"COALESCE({_text(spec, _value(spec))}, {_sql_text(column.missing)})"
    value = _text(spec, _resolved(spec))
    blanks = ", ".join(_sql_text(blank) for blank in column.blanks)
    return f"CASE WHEN {value} IS NULL OR {value} IN ({blanks}) THEN '' ELSE {value} END"


#: Every identity field: the experiment's key in the reports (lines of any version).
_IDENTITY = (*identity_fields(MODEL), *identity_fields(EXPERIMENT))

_ALL_NULL = " AND ".join(f'"{name}" IS NULL' for name in READ_COLUMNS if name not in _SETTINGS_ONLY)

#: A line's `kind`: usable, naming no model or experiment, unreadable (a bad line), or to be
#: checked in Python (`settle`, as the runner reads lines): of a newer schema (its identity
#: may hold fields this version cannot read: core.config.unreadable_identity), without a
#: version read (absent, which is fine, or null, a bad line). Usable lines with a time of
#: exactly 1 s are looked at too (`maybe_bool`: a JSON `true`, which DuckDB reads as 1).
USABLE, NAMELESS, UNREADABLE, CHECK = 0, 1, 2, 3
#: A timestamp no date can show (core.files.results_file.timestamp_out_of_range): a bad line.
_TIMESTAMP_OUT_OF_RANGE = " OR ".join(
    f'(isfinite("{key}") AND NOT "{key}" BETWEEN {TIMESTAMP_RANGE[0]!r} AND {TIMESTAMP_RANGE[1]!r})'
    for key in TIMESTAMP_KEYS)


_NOT_RUN_CODES = ", ".join(_sql_text(c.value) for c in (VerificationCode.VERIFIER_SKIPPED, VerificationCode.VERIFIER_DIDNT_RUN))

#: TFLOP/s from a line's FLOP count and its figure, for lines that do not give them.
_COUNTED_TFLOPS = "workload.flops_per_iteration / list_aggregate(_times, 'median') / 1e12"

#: The normalised columns, computed from the typed read in the same pass: (name, SQL).
_NORMALISED_COLUMNS: list[tuple[str, str]] = [
    ("kind", f"""CASE WHEN {_ALL_NULL} THEN {UNREADABLE}
         WHEN schema_version IS NOT NULL AND NOT (json_type(schema_version) IN ('UBIGINT', 'BIGINT', 'DOUBLE')
              AND TRY_CAST(schema_version AS DOUBLE) BETWEEN 1 AND {MAX_SCHEMA_VERSION}
              AND TRY_CAST(schema_version AS DOUBLE) = floor(TRY_CAST(schema_version AS DOUBLE))) THEN {UNREADABLE}
         WHEN {_TIMESTAMP_OUT_OF_RANGE} THEN {UNREADABLE}
         WHEN model.model_name IS NULL OR model.model_name = '' OR experiment IS NULL THEN {NAMELESS}
         WHEN TRY_CAST(schema_version AS DOUBLE) > {LINE_SCHEMA_VERSION} OR schema_version IS NULL THEN {CHECK}
         ELSE {USABLE} END"""),
    # A time of exactly 1 s may be a JSON `true` (DuckDB reads it as 1): `settle` looks.
    ("maybe_bool", """COALESCE(list_contains(metrics.per_iter_time, 1.0), false)"""),
    ("run", """COALESCE(run_id, '')"""),
    ("ts", f"""COALESCE({_finite('"timestamp"')}, 0.0)"""),
    ("fin", f"""COALESCE({_finite('finished_at')}, {_finite('"timestamp"')}, 0.0)"""),
    ("suite", """COALESCE(model.suite_name, '')"""),
    ("model", """model.model_name"""),
    # The configuration's columns (core.columns).
    *((column.name, _config_column(column)) for column in config_columns()),
    ("bs", f"""TRY_CAST(COALESCE({_positive('batch_size_used')}, {_positive('experiment.batch_size')}) AS BIGINT)"""),
    ("key", f"""hash({', '.join(f"COALESCE(CAST({_resolved(spec)} AS VARCHAR), '<null>')" for spec in _IDENTITY)})"""),
    ("fp", """COALESCE(NULLIF(left(fingerprint, 12), ''), 'h' || left(printf('%016x', key), 11))"""),
    ("status", """CASE WHEN status IN ('ok', 'failed', 'skipped') THEN status
         WHEN status IS NOT NULL THEN 'failed'
         WHEN metrics.error = 'SKIP' THEN 'skipped'
         WHEN COALESCE(metrics.error, '') <> '' THEN 'failed'
         ELSE 'ok' END"""),
    ("code", f"""COALESCE(verification_code, {_sql_text(VerificationCode.VERIFIER_DIDNT_RUN.value)})"""),
    ("times", """_times"""),
    ("n_times", """COALESCE(len(_times), 0)"""),
    ("med", """list_aggregate(_times, 'median')"""),
    ("cold", f"""{_figure('cold_start_time')}"""),
    ("compile_given", f"""{_figure('compile_time_s')}"""),
    ("peak_dev", f"""COALESCE({_positive('summary.peak_device_memory_bytes')}, {_positive('metrics.peak_device_memory_bytes')})"""),
    ("peak_host", f"""COALESCE({_positive('summary.peak_host_memory_bytes')}, {_positive('metrics.peak_host_memory_bytes')})"""),
    ("eager_peak_dev", f"""{_positive('summary.eager_peak_device_memory_bytes')}"""),
    # The line that says what happened (core.schema.error_headline): the first, or the
    # last of a bare Python traceback (the exception).
    ("error", """CASE WHEN trim(COALESCE(metrics.error, '')) NOT IN ('', 'SKIP')
         THEN left(trim(CASE WHEN starts_with(trim(metrics.error), 'Traceback')
              THEN list_last(list_filter(string_split(trim(metrics.error), chr(10)), lambda s: trim(s) <> ''))
              ELSE list_first(list_filter(string_split(trim(metrics.error), chr(10)), lambda s: trim(s) <> '')) END), 300)
         ELSE '' END"""),
    ("skip_reason", """COALESCE(skip_reason, CASE WHEN metrics.error = 'SKIP' THEN 'SKIP' END, '')"""),
    ("accel_model", """COALESCE(experiment.accelerator_model, '')"""),
    ("graph_count", f"""{_figure('dynamo_graph_count')}"""),
    ("unique_graphs", f"""{_figure('dynamo_unique_graphs')}"""),
    ("graph_breaks", f"""{_figure('dynamo_graph_breaks')}"""),
    ("unique_graph_breaks", """COALESCE(cardinality(summary.dynamo_graph_break_reasons), cardinality(metrics.dynamo_graph_break_reasons))"""),
    ("calls_captured", f"""COALESCE({_finite('summary.calls_captured')}, {_finite('summary.dynamo_counters.stats.calls_captured')},
             {_finite('metrics.calls_captured')}, {_finite('metrics.dynamo_counters.stats.calls_captured')})"""),
    ("flops", f"""{_positive('workload.flops_per_iteration')}"""),
    ("paired", f"""COALESCE({_positive('summary.paired_speedup.speedup')}, {_positive('summary.paired_speedup.median')})"""),
    ("paired_p", f"""{_finite('summary.paired_speedup.p_value')}"""),
    ("paired_method", """COALESCE(summary.paired_speedup.method, '')"""),
    ("unreliable", """COALESCE(summary.unreliable, false)"""),
    ("unreliable_reason", """COALESCE(array_to_string(summary.unreliable_reasons, '; '), summary.unreliable_reason, '')"""),
    ("process_spread", f"""{_finite('summary.processes.spread')}"""),
    ("host_bound", """COALESCE(summary.host_bound, false)"""),
    ("host_bound_fraction", f"""{_finite('summary.host_bound_fraction')}"""),
    ("slow_ratio", f"""{_finite('summary.slow_period.ratio')}"""),
    ("tflops", f"""COALESCE({_positive('summary.throughput.tflops')}, {_positive(_COUNTED_TFLOPS)})"""),
    ("peak_fraction", f"""{_finite('summary.throughput.fraction_of_peak')}"""),
    ("peak_note", """COALESCE(summary.throughput.no_peak_reason, '')"""),
    # Any valid line's settings (one naming no model too): `settings_of` counts them per file.
    ("settings", """CASE WHEN json_type(environment.torch_settings) = 'OBJECT'
         THEN CAST(environment.torch_settings AS VARCHAR) END"""),
]

#: The columns only a selected line needs (a record's details); every other column is
#: needed for every line (selecting, grouping into runs, the history).
DETAIL_COLUMNS = ("fp", "times", "peak_host", "error", "skip_reason", "graph_count", "unique_graphs",
                  "graph_breaks", "unique_graph_breaks", "calls_captured", "paired_p", "paired_method",
                  "unreliable", "unreliable_reason", "process_spread", "host_bound",
                  "host_bound_fraction", "slow_ratio", "tflops", "peak_fraction", "peak_note")
#: Every normalised column (a file read with its details, or cached).
NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS)
#: The columns of every line (`kind` aside, which only sets lines aside).
#: Columns of the parsed table that are no line's: why it was set aside, and its settings
#: (counted per file, never cached per line).
FILE_COLUMNS = ("kind", "maybe_bool", "settings")
LINE_COLUMNS = tuple(name for name, _ in _NORMALISED_COLUMNS if name not in DETAIL_COLUMNS and name not in FILE_COLUMNS)
_LINE_NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS if name not in DETAIL_COLUMNS)
_BARE_NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS
                               if name not in DETAIL_COLUMNS and name != "settings")
#: What a cache of normalised rows must have been written with to be read.
SCHEMA_VERSION = f"{_COLUMNS_VERSION}-{hashlib.sha256(NORMALISED.encode()).hexdigest()[:16]}"


#: Columns every reader of the `lines` view can rely on, besides fi, ord and id.
DERIVED = """
    (status = 'ok' AND med > 0) AS ran,
    COALESCE(compile_given, CASE WHEN cold IS NOT NULL THEN
        (CASE WHEN med IS NOT NULL THEN greatest(0.0, cold - med) ELSE cold END) END) AS compile
"""


@dataclass
class Provenance:
    """What one run's first line in a file says about how it was made."""

    run: str
    command: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "command": self.command, "environment": self.environment}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Provenance":
        environment = data.get("environment")
        return cls(str(data.get("run", "")), str(data.get("command") or ""),
                   environment if isinstance(environment, dict) else {})


@dataclass
class FileScan:
    """One results file as the engine holds it."""

    path: Path
    #: DuckDB relation (a table name or a read_parquet(...) call) with the usable rows.
    relation: str
    rows: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    #: Line numbers of valid lines naming no model or experiment.
    unusable: list[int] = field(default_factory=list)
    provenance: dict[str, Provenance] = field(default_factory=dict)
    from_cache: bool = False
    #: The distinct settings its lines hold (JSON text) and how many lines hold each; None
    #: where they were not read.
    settings: Optional[list[tuple[str, int]]] = field(default_factory=list)
    #: Whether `relation` holds the `DETAIL_COLUMNS` too; if not, they are read again from
    #: the lines' text, found with `index`.
    details: bool = True
    index: Optional["NewlineIndex"] = None


def connect(temp_dir: Path, threads: Optional[int] = None):
    """A DuckDB connection for the reports (bounded memory, spills to temp_dir)."""
    try:
        import duckdb
    except ImportError as error:
        raise ReportError("the reports need DuckDB: pip install -e '.[reports]'") from error

    con = duckdb.connect(config={
        "threads": threads or max(1, os.cpu_count() or 1),
        "memory_limit": MEMORY_LIMIT,
        "temp_directory": str(temp_dir),
        "preserve_insertion_order": True,
    })
    con.execute("SET enable_progress_bar = false")  # it would write to the terminal
    return con


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a folder stands for every *.jsonl file under it (sorted)."""
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise ReportError(f"folder {str(path)!r} holds no *.jsonl results file")
            files.extend(found)
        elif not path.exists():
            raise ReportError(f"results file {str(path)!r} does not exist")
        elif not path.is_file():
            # A device or a pipe may never end (report /dev/zero): regular files only.
            raise ReportError(f"results file {str(path)!r} is not a regular file")
        else:
            files.append(path)
    seen: set[str] = set()
    unique = []
    for path in files:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append(path)
    return unique


def scan_into(con, source: Path, table: str, details: bool = True, settings: bool = True) -> int:
    """Parse `source` into TEMP table `table` (every non-blank line, in order); its row count.

    Without `settings` (and without `details`), the lines' settings are not read (no
    `settings` column). Without `details`, the table holds `kind` and `LINE_COLUMNS` only (about a sixth less
    work over every line); a selected line's details are then read again from its text
    (`reports.read.columnar.Engine.ensure_details`).

    DuckDB's reader refuses a whole file holding a line over its `maximum_object_size`
    (16 MiB, and a line over twice that is an error even with ignore_errors). Then the file
    is read again with room for its longest line, if that is at most `MAX_LINE_BYTES`; the
    longer lines are replaced, in a copy, by a line that is no object (same line count,
    so ordinals and line numbers hold), which `classify` names as too long.
    """
    if details:
        columns, select = READ_COLUMNS, NORMALISED
    else:
        columns, select = (LINE_READ_COLUMNS, _LINE_NORMALISED) if settings else (_BARE_READ_COLUMNS, _BARE_NORMALISED)

    def scan(path: Path, object_size: Optional[int] = None) -> None:
        size = f", maximum_object_size={int(object_size)}" if object_size else ""
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {select} FROM (SELECT *, {_SAMPLES} "
            f"AS _times FROM read_ndjson("
            f"{_sql_text(str(path))}, format='newline_delimited', records=true, "
            f"ignore_errors=true{size}, columns={_columns_argument(columns)}))"
        )

    with duckdb_readable(source) as readable:
        try:
            scan(readable)
        except Exception as error:  # noqa: BLE001 - duckdb.InvalidInputException, checked below
            if "maximum_object_size" not in str(error):
                raise
            longest = longest_line(source)
            if longest <= MAX_LINE_BYTES:
                scan(readable, longest + _OBJECT_SLACK)
            else:
                with tempfile.TemporaryDirectory(prefix="reports-long-lines-") as folder:
                    copy = Path(folder) / "lines.jsonl"
                    try:
                        _copy_without_long_lines(source, copy)
                    except OSError as error:
                        raise ScratchError(folder, error) from error
                    scan(copy, MAX_LINE_BYTES + _OBJECT_SLACK)
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@contextlib.contextmanager
def duckdb_readable(path: Path) -> Iterator[Path]:
    """`path`, or where its name holds bytes that are no UTF-8 (which DuckDB cannot take), a
    link to it in a scratch folder whose name can be taken."""
    try:
        str(path).encode("utf-8")
        yield path
        return
    except UnicodeEncodeError:
        pass
    with tempfile.TemporaryDirectory(prefix="reports-link-") as folder:
        link = Path(folder) / "results.jsonl"
        try:
            link.symlink_to(os.path.abspath(path))
        except OSError as error:
            raise ScratchError(folder, error) from error
        yield link


def longest_line(path: Path) -> int:
    """The length in bytes of the file's longest line (its newline left out)."""
    import numpy as np

    ends = index_newlines(path).ends
    size = path.stat().st_size
    bounds = np.concatenate((np.array([-1], dtype=np.int64), ends.astype(np.int64),
                             np.array([size], dtype=np.int64)))
    return int(np.max(np.diff(bounds)) - 1) if len(bounds) > 1 else 0


def _copy_without_long_lines(source: Path, copy: Path) -> None:
    """`source` with each line over MAX_LINE_BYTES replaced by a JSON string (no object)."""
    with open(source, "rb") as raw, open(copy, "wb") as out:
        while True:
            line = raw.readline(MAX_LINE_BYTES + 2)
            if not line:
                return
            if len(line) <= MAX_LINE_BYTES + 1:
                out.write(line)
                continue
            while not line.endswith(b"\n"):  # skip the rest of it without holding it
                line = raw.readline(1 << 24)
                if not line:
                    break
            out.write(b'"too long"\n')


def _loads(text: bytes) -> tuple[Any, Optional[str]]:
    """A line's JSON value, or None and why it cannot be read (never raises)."""
    if len(text) > MAX_LINE_BYTES:
        return None, f"longer than {MAX_LINE_BYTES} bytes"
    try:
        return loads_line(text), None
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as error:
        reason = str(error).split(":", 1)[0] if isinstance(error, UnicodeDecodeError) else str(error)
        return None, reason[:200] or "invalid JSON"


def settings_of(con, table: str, below: Optional[int] = None, at_least: int = 0) -> list[tuple[str, int]]:
    """The distinct settings (`environment.torch_settings` as JSON text) of the lines of
    `table` (rows `at_least` to `below`), and how many lines hold each."""
    bounds = (f" AND rowid < {int(below)}" if below is not None else "") + (f" AND rowid >= {int(at_least)}" if at_least else "")
    return [(text, int(count)) for text, count in con.execute(
        f"SELECT settings, count(*) FROM {table} WHERE settings IS NOT NULL{bounds} "
        f"GROUP BY settings ORDER BY settings").fetchall()]


def to_settle(con, table: str) -> list[int]:
    """The ordinals of the rows of `table` that `settle` must judge (usually none)."""
    return [r[0] for r in con.execute(
        f"SELECT rowid FROM {table} WHERE kind = {CHECK} OR (kind = {USABLE} AND maybe_bool) "
        f"ORDER BY rowid").fetchall()]


def settle(con, table: str, located: dict[int, tuple[int, bytes]]) -> None:
    """Judge the rows to check (`to_settle`, their lines' texts in `located`) as the runner
    reads lines: a line of a newer schema whose identity holds fields this version does
    not know (core.config.unreadable_identity) is not this version's experiment, and a
    line of the wrong shape (core.files.results_file.shape_problem: a schema_version null,
    times that are true or false) is a bad line; both are set aside (kind UNREADABLE,
    `classify` says why). The others are usable."""
    unreadable = []
    for ordinal, (_, text) in located.items():
        line, _ = _loads(text)
        if isinstance(line, dict) and (_settled_problem(line) or unreadable_identity(line)):
            unreadable.append(ordinal)
    if unreadable:
        con.execute(f"UPDATE {table} SET kind = {UNREADABLE} WHERE rowid IN (SELECT unnest(?::BIGINT[]))",
                    [unreadable])
    con.execute(f"UPDATE {table} SET kind = {USABLE} WHERE kind = {CHECK}")


def _settled_problem(line: dict[str, Any]) -> bool:
    """What `settle` sets aside besides newer lines: a schema_version null, or times that
    are true or false (shape_problem's reasons; DuckDB reads the rest of a line tolerantly)."""
    if "schema_version" in line and line["schema_version"] is None:
        return True
    metrics = line.get("metrics")
    times = metrics.get("per_iter_time") if isinstance(metrics, dict) else None
    return isinstance(times, list) and any(isinstance(value, bool) for value in times)


def set_aside(con, table: str) -> tuple[list[int], list[int], dict[str, int]]:
    """(ordinals of unreadable rows, of rows naming no model, first ordinal of each run)."""
    unreadable = [r[0] for r in con.execute(f"SELECT rowid FROM {table} WHERE kind = 2 ORDER BY rowid").fetchall()]
    nameless = [r[0] for r in con.execute(f"SELECT rowid FROM {table} WHERE kind = 1 ORDER BY rowid").fetchall()]
    runs = dict(con.execute(f"SELECT run, min(rowid) FROM {table} WHERE kind = 0 GROUP BY run").fetchall())
    return unreadable, nameless, runs


#: Bytes that may open a blank line: ASCII whitespace, as bytes.strip() removes it.
_BLANK_BYTES = b" \t\r\n\x0b\x0c"
_BLOCK = 1 << 24


@dataclass
class NewlineIndex:
    """Where a file's lines end: every newline's offset, and the starts of lines that may
    be blank (those opening with whitespace)."""

    ends: Any  # numpy int64 array
    suspects: list[int]

    @property
    def lines(self) -> int:
        """The number of newlines read."""
        return len(self.ends)


def index_newlines(path: Path, stop: Optional[threading.Event] = None) -> NewlineIndex:
    """The file's newlines (and the starts of lines that may be blank).

    One block at a time in memory (never mapping the file), the newlines are found by the
    byte search of `bytearray.find` (memchr), whose cost follows the lines rather than the
    bytes: a third of numpy's comparison of every byte over lines of a few kilobytes, in
    this thread that runs beside DuckDB's parse. `stop` ends it early.
    """
    import numpy as np

    buffer = bytearray(_BLOCK)
    opens_blank = np.zeros(256, dtype=bool)
    opens_blank[list(_BLANK_BYTES)] = True
    found: list[Any] = []
    suspects: list[int] = []
    base, at_line_start = 0, True
    with open(path, "rb", buffering=0) as raw:
        while stop is None or not stop.is_set():
            size = raw.readinto(buffer)
            if not size:
                break
            ends = []
            find, append = buffer.find, ends.append
            position = find(b"\n", 0, size)
            while position >= 0:
                append(position)
                position = find(b"\n", position + 1, size)
            newlines = np.array(ends, dtype=np.int64)
            starts = newlines[newlines < size - 1] + 1
            if at_line_start:
                starts = np.concatenate((np.zeros(1, dtype=np.int64), starts))
            block = np.frombuffer(buffer, dtype=np.uint8, count=size)
            suspects.extend((starts[opens_blank[block[starts]]] + base).tolist())
            del block  # the buffer is read into again
            found.append(newlines + base)
            at_line_start = buffer[size - 1] == 10
            base += size
    return NewlineIndex(np.concatenate(found) if found else np.zeros(0, dtype=np.int64), suspects)


def lines_at(path: Path, index: NewlineIndex, ordinals: Sequence[int]) -> dict[int, tuple[int, bytes]]:
    """Line number (1-based) and text of the given ordinals, with the file's index.

    An ordinal counts the non-blank lines, as DuckDB's reader numbers its rows; blank and
    whitespace-only lines count for line numbers only. Only the lines wanted are read.
    """
    found: dict[int, tuple[int, bytes]] = {}
    ends = index.ends
    with open(path, "rb") as raw:
        blank = []
        for start in index.suspects:
            raw.seek(start)
            if not raw.readline().strip():
                blank.append(int(ends.searchsorted(start)))  # its index: the newlines before it
        shift, position = 0, 0
        for ordinal in sorted(set(ordinals)):
            while position < len(blank) and blank[position] <= ordinal + shift:
                shift += 1
                position += 1
            line = ordinal + shift
            if line > len(ends):
                break  # past the last line
            raw.seek(int(ends[line - 1]) + 1 if line > 0 else 0)
            if line < len(ends):  # at most one byte over the longest line read
                text = raw.read(min(int(ends[line]) - raw.tell(), MAX_LINE_BYTES + 1))
            else:
                text = raw.readline(MAX_LINE_BYTES + 1)  # the unterminated last line, if any
                if not text.strip():
                    break
                text = text.rstrip(b"\n")
            found[ordinal] = (line + 1, text)
    return found


def classify(path: Path, located: dict[int, tuple[int, bytes]], unreadable: list[int],
             nameless: list[int], line_offset: int = 0) -> tuple[list[BadLine], list[int]]:
    """Bad lines (with their reason) and the line numbers of lines naming no model."""
    bad: list[BadLine] = []
    unusable: list[int] = []
    for ordinal in unreadable:
        lineno, text = located.get(ordinal, (0, b""))
        value, reason = _loads(text)
        if reason is not None:
            bad.append(BadLine(str(path), lineno + line_offset, reason))
            continue
        if not isinstance(value, dict):
            bad.append(BadLine(str(path), lineno + line_offset, "not a JSON object"))
        elif shape_problem(value):
            bad.append(BadLine(str(path), lineno + line_offset, shape_problem(value)))
        elif unreadable_identity(value):
            bad.append(BadLine(str(path), lineno + line_offset, _newer_reason(value)))
        else:
            unusable.append(lineno + line_offset)
    unusable.extend(located.get(o, (0, b""))[0] + line_offset for o in nameless)
    return bad, sorted(unusable)


def _newer_reason(line: dict[str, Any]) -> str:
    fields = unreadable_identity(line)
    return (f"written by a newer version (schema {line.get('schema_version')}) whose experiment "
            f"holds {', '.join(fields[:5])}, which this version does not know: not this "
            "version's experiment")


def provenance_of(located: dict[int, tuple[int, bytes]], runs: dict[str, int]) -> dict[str, Provenance]:
    found: dict[str, Provenance] = {}
    for run, ordinal in runs.items():
        line, _ = _loads(located.get(ordinal, (0, b""))[1])
        if not isinstance(line, dict):
            line = {}
        environment = line.get("environment")
        found[run] = Provenance(run, str(line.get("command") or ""),
                                environment if isinstance(environment, dict) else {})
    return found
