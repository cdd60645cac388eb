"""The columns the reports compute from each results line, as DuckDB SQL.

What DuckDB reads of a line (`READ_COLUMNS`: typed, everything else skipped by the parser)
and the normalised columns computed from it in the same pass (`NORMALISED`) come from the
tables in core, and nowhere else: the configuration's columns from core.columns (the field
table), the experiment's key from its identity fields, and every measured figure from
core.measures, a column named as the figure. Here are only the columns every line has: its
place (run, timestamps), identity, status, its timed runs (`times`, `med`) and its peaks.

Every figure is read tolerantly, as `core.schema` does: from the paths the table names, in
order (a whole-experiment figure from the line's `summary`, else from `metrics`, the layout
before `summary`); values of the wrong type read as missing (numbers written as strings
are read as numbers).

A read without the details (`--no-cache`) computes only `LINE_COLUMNS`: the columns every
line needs. The others (`DETAIL_COLUMNS`: the figures not marked `every_line`, the
per-run times, the error) are computed for the few lines a report selects.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

from core.columns import LABELS_COLUMN, STACK_COLUMN, ConfigColumn, config_columns
from core.fields import EXPERIMENT, MODEL, SCHEMA_VERSION as LINE_SCHEMA_VERSION, Field, identity_fields
from core.files.results_file import MAX_SCHEMA_VERSION, TIMESTAMP_KEYS, TIMESTAMP_RANGE
from core.measures import Measure, measures
from core.schema import VerificationCode

#: Bumped whenever the normalised columns change meaning: older caches are rebuilt (and so
#: are those of another field or figure table: `SCHEMA_VERSION` holds a digest of the SQL).
_COLUMNS_VERSION = 9

_D, _V, _B = "DOUBLE", "VARCHAR", "BOOLEAN"
#: The largest number a line's value is cast to an integer from: any larger one is bounded
#: first (a cast of 2**63 fails), or read as text.
MAX_CAST_INTEGER = 2**52
#: How DuckDB reads a measured figure of each kind (core.measures).
_KIND_TYPES = {float: _D, int: _D, str: _V, bool: _B}


def _field_type(spec: Field) -> str:
    """How DuckDB reads a field of the table (core.fields): seeds as text (any size)."""
    if spec.kind is bool:
        return _B
    if spec.kind is dict:
        return "JSON"
    if spec.kind is int:
        return _V if spec.name == "seed" else _D
    return _V


#: What DuckDB reads of each line for the columns here (the figures' paths are added).
_BASE_READ: dict[str, Any] = {
    # As JSON, so that a version that is no number ("abc") is seen, not read as NULL.
    "schema_version": "JSON",
    "model": {spec.key: _field_type(spec) for spec in identity_fields(MODEL)},
    "experiment": {
        **{spec.key: _field_type(spec) for spec in identity_fields(EXPERIMENT)},
        # Lines with requested_batch_size hold the batch size used here.
        "batch_size": _D, "accelerator_model": _V,
    },
    "seed": _V,
    "metrics": {"per_iter_time": "DOUBLE[]", "error": _V,
                "peak_device_memory_bytes": _D, "peak_host_memory_bytes": _D},
    "summary": {
        "peak_device_memory_bytes": _D, "peak_host_memory_bytes": _D,
        # How many entries lead the per-run lists for the cold-start run (core.schema).
        "cold_start_entries": _D,
        # Several timing processes: each one's median per iteration (runner/run/process/processes.py).
        "processes": {"medians": "DOUBLE[]"},
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
    # The settings in force (compare names those that differ: reports.analyse.settings_diff).
    "environment": {"torch_settings": "JSON"},
}
#: Read for the settings only: a line holding no other key read is set aside as before.
_SETTINGS_ONLY = ("environment",)
#: What only the details read, besides the figures' (`DETAIL_COLUMNS`).
_BASE_DETAIL_READ = ("summary.peak_host_memory_bytes", "metrics.peak_host_memory_bytes")


def _reads(measure: Measure) -> list[tuple[str, str]]:
    """The paths a figure reads, with their DuckDB types."""
    return [(path, _KIND_TYPES[measure.kind]) for path in measure.paths] + list(measure.reads)


def _with(spec: dict[str, Any], reads: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """`spec` with the dotted paths added (a path already read keeps its type)."""
    grown = json.loads(json.dumps(spec))
    for path, duck_type in reads:
        *parents, leaf = path.split(".")
        node = grown
        for parent in parents:
            node = node.setdefault(parent, {})
            if not isinstance(node, dict):
                raise ValueError(f"figure path {path!r}: {parent!r} is read as a value, not an object")
        node.setdefault(leaf, duck_type)
    return grown


def _without(spec: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """`spec` less the dotted paths."""
    pruned = json.loads(json.dumps(spec))
    for path in paths:
        *parents, leaf = path.split(".")
        node = pruned
        for parent in parents:
            node = node[parent]
        del node[leaf]
    return pruned


def _leaves(spec: dict[str, Any], prefix: str = "") -> list[str]:
    return [leaf for name, sub in spec.items()
            for leaf in (_leaves(sub, f"{prefix}{name}.") if isinstance(sub, dict) else [f"{prefix}{name}"])]


#: What DuckDB reads of each line: the columns' here, and every figure's paths.
READ_COLUMNS: dict[str, Any] = _with(_BASE_READ, (read for m in measures() for read in _reads(m)))
_LINE_READ = _with(_without(_BASE_READ, _BASE_DETAIL_READ),
                   (read for m in measures() if m.every_line for read in _reads(m)))
#: What a read without the details reads: the same top-level keys (so a line is set aside
#: exactly as with every column), without what only the details need.
LINE_READ_COLUMNS = {name: _LINE_READ.get(name, spec) for name, spec in READ_COLUMNS.items()}
#: The paths a read without the details leaves out.
DETAIL_READ = tuple(sorted(set(_leaves(READ_COLUMNS)) - set(_leaves(LINE_READ_COLUMNS))))
#: The same, less the settings (a read for `report` or `score`, which never name them).
BARE_READ_COLUMNS = {name: spec for name, spec in LINE_READ_COLUMNS.items() if name not in _SETTINGS_ONLY}


def _duck_type(spec: Any) -> str:
    if isinstance(spec, dict):
        return "STRUCT(" + ", ".join(f'"{name}" {_duck_type(sub)}' for name, sub in spec.items()) + ")"
    return spec


def columns_argument(columns: dict[str, Any]) -> str:
    """`columns` as read_ndjson's argument."""
    return "{" + ", ".join(f"'{name}': '{_duck_type(spec)}'" for name, spec in columns.items()) + "}"


def _finite(expression: str) -> str:
    return f"(CASE WHEN isfinite({expression}) THEN {expression} END)"


def _positive(expression: str) -> str:
    return f"(CASE WHEN isfinite({expression}) AND {expression} > 0 THEN {expression} END)"


def _figure_sql(measure: Measure) -> str:
    """A measured figure's column: the first usable value of its paths (or its own SQL
    over them), as the record holds it (text and flags never NULL)."""
    if measure.kind in (float, int):
        check = _positive if measure.positive else _finite
        value = f"COALESCE({', '.join(check(path) for path in measure.paths)})" if measure.paths else "NULL"
    else:
        value = f"COALESCE({', '.join(measure.paths)})" if measure.paths else "NULL"
    expression = measure.sql.replace("{value}", value) if measure.sql else value
    if measure.kind is int:
        return f"TRY_CAST({expression} AS BIGINT)"
    if measure.kind is str:
        return f"COALESCE({expression}, '')"
    if measure.kind is bool:
        return f"COALESCE({expression}, false)"
    return expression


#: The cold-start entries to leave out of the steady state (core.schema.timed_values).
#: Bounded before the cast (2**63 or 1e19 leave nothing timed, as core.figures reads them).
_COLD_ENTRIES = ("(CASE WHEN isfinite(summary.cold_start_entries) AND summary.cold_start_entries > 0 "
                 f"THEN CAST(least(summary.cold_start_entries, {MAX_CAST_INTEGER}) AS BIGINT) ELSE 0 END)")


#: An experiment's samples: the medians of its timing processes where it had several (the
#: figure is their median, its interval theirs, and compare and the history test them),
#: else its timed runs' times per iteration.
#: A time a sample can be: above zero and below a day (hand-made lines hold -1e3, 0, 1e308).
_A_TIME = "lambda x: isfinite(x) AND x > 0 AND x < 86400"
SAMPLES = (f"(CASE WHEN len(list_filter(summary.processes.medians, {_A_TIME})) >= 2 "
            f"THEN list_filter(summary.processes.medians, {_A_TIME}) "
            f"ELSE list_filter(list_slice(metrics.per_iter_time, 1 + {_COLD_ENTRIES}, "
            f"len(metrics.per_iter_time)), {_A_TIME}) END)")


def quoted(value: str) -> str:
    """`value` as an SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, dict)):
        return "'" + json.dumps(dict(value), sort_keys=True, separators=(",", ":")) + "'"
    return quoted(str(value))


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
    literal = quoted(str(implied)) if _field_type(spec) == _V else _sql_literal(implied)
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
    default = (quoted(str(spec.default)) if _field_type(spec) == _V and spec.default is not None
               else _sql_literal(spec.default))
    return (f"CASE WHEN {resolved} IS DISTINCT FROM {default} "
            f"THEN {quoted(spec.name + '=')} || {text} END")


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
        return f"COALESCE({_text(spec, _value(spec))}, {quoted(column.missing)})"
    value = _text(spec, _resolved(spec))
    blanks = ", ".join(quoted(blank) for blank in column.blanks)
    return f"CASE WHEN {value} IS NULL OR {value} IN ({blanks}) THEN '' ELSE {value} END"


#: Every identity field: the experiment's key in the reports (lines of any version).
_IDENTITY = (*identity_fields(MODEL), *identity_fields(EXPERIMENT))

_ALL_NULL = " AND ".join(f'"{name}" IS NULL' for name in READ_COLUMNS if name not in _SETTINGS_ONLY)

#: A line's `kind`: usable, naming no model or experiment, unreadable (a bad line), or to be
#: checked in Python (reports.read.engine.settle, as the runner reads lines): of a newer
#: schema (its identity may hold fields this version cannot read:
#: core.config.unreadable_identity), or without a version read (absent, which is fine, or
#: null, a bad line). Usable lines with a time of exactly 1 s are looked at too
#: (`maybe_bool`: a JSON `true`, which DuckDB reads as 1).
USABLE, NAMELESS, UNREADABLE, CHECK = 0, 1, 2, 3
#: A timestamp no date can show (core.files.results_file.timestamp_out_of_range): a bad line.
_TIMESTAMP_OUT_OF_RANGE = " OR ".join(
    f'(isfinite("{key}") AND NOT "{key}" BETWEEN {TIMESTAMP_RANGE[0]!r} AND {TIMESTAMP_RANGE[1]!r})'
    for key in TIMESTAMP_KEYS)

#: The normalised columns, computed from the typed read in the same pass: (name, SQL). A
#: column may use those before it.
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
    ("code", f"""COALESCE(verification_code, {quoted(VerificationCode.VERIFIER_DIDNT_RUN.value)})"""),
    ("times", """_times"""),
    ("n_times", """COALESCE(len(_times), 0)"""),
    ("med", """list_aggregate(_times, 'median')"""),
    ("peak_dev", f"""COALESCE({_positive('summary.peak_device_memory_bytes')}, {_positive('metrics.peak_device_memory_bytes')})"""),
    ("peak_host", f"""COALESCE({_positive('summary.peak_host_memory_bytes')}, {_positive('metrics.peak_host_memory_bytes')})"""),
    # The line that says what happened (core.schema.error_headline): the first, or the
    # last of a bare Python traceback (the exception).
    ("error", """CASE WHEN trim(COALESCE(metrics.error, '')) NOT IN ('', 'SKIP')
         THEN left(trim(CASE WHEN starts_with(trim(metrics.error), 'Traceback')
              THEN list_last(list_filter(string_split(trim(metrics.error), chr(10)), lambda s: trim(s) <> ''))
              ELSE list_first(list_filter(string_split(trim(metrics.error), chr(10)), lambda s: trim(s) <> '')) END), 300)
         ELSE '' END"""),
    ("skip_reason", """COALESCE(skip_reason, CASE WHEN metrics.error = 'SKIP' THEN 'SKIP' END, '')"""),
    ("accel_model", """COALESCE(experiment.accelerator_model, '')"""),
    # The measured figures (core.measures), each a column named as the figure.
    *((measure.name, _figure_sql(measure)) for measure in measures()),
    # Any valid line's settings (one naming no model too): `settings_of` counts them per file.
    ("settings", """CASE WHEN json_type(environment.torch_settings) = 'OBJECT'
         THEN CAST(environment.torch_settings AS VARCHAR) END"""),
]

#: The columns only a selected line needs (a record's details); every other column is
#: needed for every line (selecting, grouping into runs, the history).
DETAIL_COLUMNS = ("fp", "times", "peak_host", "error", "skip_reason",
                  *(measure.name for measure in measures() if not measure.every_line))
#: Columns of the parsed table that are no line's: why it was set aside (and whether to
#: look at it again), and its settings (counted per file; kept with the rows for compare).
FILE_COLUMNS = ("kind", "maybe_bool", "settings")
#: The columns of every line (`kind` aside, which only sets lines aside).
LINE_COLUMNS = tuple(name for name, _ in _NORMALISED_COLUMNS if name not in DETAIL_COLUMNS and name not in FILE_COLUMNS)
#: Every normalised column (a file read with its details, or cached).
NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS)
LINE_NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS if name not in DETAIL_COLUMNS)
BARE_NORMALISED = ",\n".join(f"{sql} AS {name}" for name, sql in _NORMALISED_COLUMNS
                              if name not in DETAIL_COLUMNS and name != "settings")
#: What a cache of normalised rows must have been written with to be read.
SCHEMA_VERSION = f"{_COLUMNS_VERSION}-{hashlib.sha256(NORMALISED.encode()).hexdigest()[:16]}"

#: Columns every reader of the `lines` view can rely on, besides fi, ord and id.
DERIVED = "(status = 'ok' AND med > 0) AS ran"
