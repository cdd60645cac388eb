"""Results files as one DuckDB table of normalised lines: the reports' columnar engine.

DuckDB's JSON reader parses each file (`read_ndjson`, typed columns, `records=true`) into a
table with one row per non-blank line, in file order. A line that is not valid JSON, or not
a JSON object, comes back as a row of NULLs; so does a valid object holding none of the keys
read. Those rows, and the lines naming no model or experiment, are set aside. Meanwhile a
thread indexes every newline of the file (numpy, one block at a time: `index_newlines`), so
that their line numbers and texts (and, for the first line of each run, the command and
environment: the provenance) are found without parsing anything else in Python.

What is read and computed of each line is `reports.read.sql`'s (from the tables in core).
A file read for the cache keeps every normalised column. Read without it (`--no-cache`),
only the columns every line needs are kept (`LINE_COLUMNS`: about a sixth less work over a
million lines); the details of the few lines selected (`DETAIL_COLUMNS`: per-run times,
error, most figures) are parsed again from their text by the same SQL
(`reports.read.columnar.Engine.ensure_details`).

The reading goes one way: `reports.read.load` asks `reports.read.columnar.Engine` for the
files, which has `reports.read.cache` open each one, which has this module parse what it
has not kept (`parse`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from core.config import unreadable_identity
from core.files.results_file import BadLine, loads_line, shape_problem
from reports.errors import ReportError, ScratchError
from reports.read import sql
# The columns' names, for the engine's readers.
from reports.read.sql import DETAIL_COLUMNS, LINE_COLUMNS, SCHEMA_VERSION  # noqa: F401

log = logging.getLogger(__name__)

#: Row ids are file index * ID_STRIDE + ordinal of the line in its file.
ID_STRIDE = 1 << 40
MEMORY_LIMIT = "1200MB"
#: The longest line the reports read (a results line is a few kilobytes); longer ones are
#: skipped with their line number, never held whole in memory.
MAX_LINE_BYTES = 64 * 2**20
#: Room DuckDB's reader needs beyond a line's own bytes.
_OBJECT_SLACK = 1 << 16

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
        columns, select = sql.READ_COLUMNS, sql.NORMALISED
    elif settings:
        columns, select = sql.LINE_READ_COLUMNS, sql.LINE_NORMALISED
    else:
        columns, select = sql.BARE_READ_COLUMNS, sql.BARE_NORMALISED

    def scan(path: Path, object_size: Optional[int] = None) -> None:
        size = f", maximum_object_size={int(object_size)}" if object_size else ""
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {select} FROM (SELECT *, {sql.SAMPLES} "
            f"AS _times FROM read_ndjson("
            f"{sql.quoted(str(path))}, format='newline_delimited', records=true, "
            f"ignore_errors=true{size}, columns={sql.columns_argument(columns)}))"
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


def _why_bad(text: bytes) -> Optional[str]:
    """Why a line set aside is no results line, or None where it is one naming no model."""
    value, reason = _loads(text)
    if reason is not None:
        return reason
    if not isinstance(value, dict):
        return "not a JSON object"
    return shape_problem(value) or (_newer_reason(value) if unreadable_identity(value) else None)


def _newer_reason(line: dict[str, Any]) -> str:
    fields = unreadable_identity(line)
    return (f"written by a newer version (schema {line.get('schema_version')}) whose experiment "
            f"holds {', '.join(fields[:5])}, which this version does not know: not this "
            "version's experiment")


def to_settle(con, table: str) -> list[int]:
    """The ordinals of the rows of `table` that `settle` must judge (usually none)."""
    return [r[0] for r in con.execute(
        f"SELECT rowid FROM {table} WHERE kind = {sql.CHECK} OR (kind = {sql.USABLE} AND maybe_bool) "
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
        con.execute(f"UPDATE {table} SET kind = {sql.UNREADABLE} WHERE rowid IN (SELECT unnest(?::BIGINT[]))",
                    [unreadable])
    con.execute(f"UPDATE {table} SET kind = {sql.USABLE} WHERE kind = {sql.CHECK}")


def _settled_problem(line: dict[str, Any]) -> bool:
    """What `settle` sets aside besides newer lines: a schema_version null, or times that
    are true or false (shape_problem's reasons; DuckDB reads the rest of a line tolerantly)."""
    if "schema_version" in line and line["schema_version"] is None:
        return True
    metrics = line.get("metrics")
    times = metrics.get("per_iter_time") if isinstance(metrics, dict) else None
    return isinstance(times, list) and any(isinstance(value, bool) for value in times)


def classify(path: Path, located: dict[int, tuple[int, bytes]], unreadable: list[int],
             nameless: list[int], line_offset: int = 0) -> tuple[list[BadLine], list[int]]:
    """Bad lines (with their reason) and the line numbers of lines naming no model."""
    judged = [(located.get(o, (0, b""))[0] + line_offset, _why_bad(located.get(o, (0, b""))[1]))
              for o in unreadable]
    bad = [BadLine(str(path), lineno, reason) for lineno, reason in judged if reason is not None]
    unusable = [lineno for lineno, reason in judged if reason is None]
    unusable += [located.get(o, (0, b""))[0] + line_offset for o in nameless]
    return bad, sorted(unusable)


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


def _unterminated_is_blank(path: Path, start: int, size: int) -> bool:
    """Whether the file's bytes from `start` to `size` are blank (whitespace only)."""
    with open(path, "rb") as raw:
        return not os.pread(raw.fileno(), size - start, start).strip()


@dataclass
class Parsed:
    """What one parse of a file (or of a byte range of one) found: ordinals and line
    numbers count from its start."""

    rows: int
    #: The rows of whole lines (an unterminated last line left out).
    terminated_rows: int
    index: NewlineIndex
    bad: list[BadLine]
    unusable: list[int]
    provenance: dict[str, Provenance]
    #: The settings of the terminated lines, and of an unterminated last one.
    settings: list[tuple[str, int]]
    partial_settings: list[tuple[str, int]]
    #: CRC-32 of the bytes asked for (`parse`'s `digest`), read beside the parse.
    crc: Optional[int] = None

    @property
    def lines(self) -> int:
        return self.index.lines


def parse(con: Any, source: Path, table: str, *, terminated_bytes: int, display: Path,
          line_offset: int, details: bool = True, settings: bool = True, digest: int = 0) -> Parsed:
    """Parse `source` (a file, or a copy of a byte range of one) into `table` (with the
    details, or not: `scan_into`); `display` names it in bad lines, numbered from
    `line_offset`; with `digest`, the CRC-32 of its first `digest` bytes is read too.

    The file's newlines are indexed (and its bytes digested) in a thread while DuckDB parses
    it (both are needed: the line numbers of what was set aside, and each run's first line).
    Lines DuckDB cannot judge alone (`to_settle`) are judged from their text (`settle`)."""
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reports-newlines") as pool:
        indexing = pool.submit(index_newlines, source, stop)
        digesting = pool.submit(crc32_of, source, digest, stop) if digest else None
        try:
            rows = scan_into(con, source, table, details=details, settings=settings)
            size = source.stat().st_size
            partial = size > terminated_bytes and not _unterminated_is_blank(source, terminated_bytes, size)
            terminated_rows = rows - 1 if partial else rows
            checked = to_settle(con, table)
            if checked:
                settle(con, table, lines_at(source, indexing.result(), checked))
            unreadable, nameless, runs = set_aside(con, table)
            wanted = unreadable + nameless + list(runs.values())
            found = settings_of(con, table, below=terminated_rows) if settings else []
            partial_settings = settings_of(con, table, at_least=terminated_rows) if settings and partial else []
        except BaseException:
            stop.set()
            raise
        index = indexing.result()
        crc = digesting.result() if digesting is not None else None
    located = lines_at(source, index, wanted)
    bad, unusable = classify(display, located, unreadable, nameless, line_offset)
    provenance = provenance_of(located, runs)
    return Parsed(rows, terminated_rows, index, bad, unusable, provenance, found, partial_settings, crc)


def crc32_of(path: Path, stop: int, stop_event: Optional[threading.Event] = None) -> Optional[int]:
    """CRC-32 of the file's first `stop` bytes (None if it holds fewer, or when stopped)."""
    value, left = 0, stop
    with open(path, "rb") as raw:
        while left > 0:
            if stop_event is not None and stop_event.is_set():
                return None
            chunk = raw.read(min(_BLOCK, left))
            if not chunk:
                return None
            value = zlib.crc32(chunk, value)
            left -= len(chunk)
    return value


def rows_relation(table: str, ordinal_offset: int, below: Optional[int] = None, at_least: int = 0,
                  settings: bool = True) -> str:
    """The usable rows of parsed table `table` (rows `at_least` to `below`), numbered
    from `ordinal_offset`, without the columns that are no line's."""
    condition = f"kind = {sql.USABLE}"
    if below is not None:
        condition += f" AND rowid < {below}"
    if at_least:
        condition += f" AND rowid >= {at_least}"
    # The settings stay with each row (compare names those of the experiments it compared).
    return f"SELECT rowid + {ordinal_offset} AS ord, * EXCLUDE (kind, maybe_bool) FROM {table} WHERE {condition}"
