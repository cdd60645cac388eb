"""The results file: safe appends and bounded, tolerant reading (the line itself: core/schema.py).

Every writer goes through a `ResultsFile`, whose lock (`<file>.lock`, a `filelock.FileLock`)
serializes writers of one file across processes, and across machines where the shared
filesystem honours `flock` (NFSv4 and most cluster filesystems do). An append is one
`write` of one whole line, fsynced; a write that fails or comes up short (ENOSPC, EFBIG,
EIO, an interruption) is cut back to the file's previous end before the error is raised,
so a full disk or a file-size limit never leaves half a line. A line left unfinished by a
machine crash is ended with a newline before the next append, so it stays a single bad
line and never swallows the next one.

Reading never trusts the file: only regular files are read, at most the size the file had
when it was opened (a growing or endless file cannot make a reader run forever), a line
longer than `MAX_LINE_BYTES` is skipped without being held in memory, and lines that are
not JSON objects, or whose `model`, `experiment` or `summary` is not one, or whose
timestamps lie outside the dates a reader can show, or whose times are true or false, are listed as bad lines with their
numbers, never fatal. A key given twice in one object reads as its first value, as the
reports' DuckDB reader takes it (`loads_line`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional, Union

from filelock import FileLock

from core.files import strict_json

log = logging.getLogger(__name__)

MAX_BAD_LINES_LOGGED = 20
#: A results line is a few kilobytes; anything this long is not one (and is not loaded).
MAX_LINE_BYTES = 16 * 2**20
_CHUNK_BYTES = 2**20
#: The parts of a line that every reader takes for JSON objects: a line where one of them is
#: something else (`"summary": "n/a"`) is a bad line, listed with its number, never read.
OBJECT_PARTS = ("model", "experiment", "summary")
#: Versions go up by one at each change of the line; anything this large is not one.
MAX_SCHEMA_VERSION = 1000
#: The keys of a line holding seconds since the epoch, and the range of those a date can
#: show (the years 1 to 9999: Python's datetime).
TIMESTAMP_KEYS = ("timestamp", "finished_at")
TIMESTAMP_RANGE = (-62135596800.0, 253402300799.0)


class ResultsFileError(RuntimeError):
    """A results file that cannot be used at all (not a problem of single lines)."""


@dataclass
class BadLine:
    """A line of a results file that could not be read."""

    path: str
    lineno: int
    reason: str


@dataclass
class ResultsRead:
    """The lines of a results file that parsed, and those that did not.

    `end_offset` is where reading stopped (the size of the file when it was opened) and
    `file_id` the file's (device, inode): `ResultsFile.read(end_offset, last_lineno)` reads
    only what was appended since, provided the file is still the same one.
    """

    lines: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    end_offset: int = 0
    file_id: Optional[tuple[int, int]] = None
    #: The number of the last line read (blank and bad lines included).
    last_lineno: int = 0


class ResultsFile:
    """One results file: its lock, locked appends, bounded reads, backups."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self._lock: Optional[FileLock] = None

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's lock (re-entrant within a thread of this object)."""
        if self._lock is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = FileLock(str(self.lock_path))
        with self._lock:
            yield

    def append(self, line: dict[str, Any]) -> None:
        """Append one line whole, or raise OSError with the file as it was before; a line
        that is not strict JSON (a NaN or an infinity in it) raises NonFiniteNumber and is
        not written."""
        payload = encode_line(line)
        with self.locked():
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    # A writer died mid-line (machine crash): end that line so ours stays whole.
                    payload = b"\n" + payload
                try:
                    _write_all(fd, payload)
                    os.fsync(fd)
                except BaseException as error:
                    _cut_back(fd, size, self.path)
                    if isinstance(error, OSError):
                        raise OSError(error.errno, error.strerror or str(error),
                                      str(self.path)) from error
                    raise
            finally:
                os.close(fd)

    def read(self, start: int = 0, lines_before: int = 0,
             max_line_bytes: int = MAX_LINE_BYTES, log_bad_lines: bool = True) -> ResultsRead:
        """Every valid line from byte `start` (after line `lines_before`) on; invalid ones
        are listed with their line numbers (and logged), never fatal."""
        read = ResultsRead(end_offset=start, last_lineno=lines_before)
        try:
            # Non-blocking, so that opening a FIFO cannot hang; it is refused below.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return read
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ResultsFileError(f"results path {str(self.path)!r} is {what}"
                                   + (", not a file" if stat.S_ISDIR(info.st_mode) else ""))
        with open(fd, "rb") as raw:
            read.file_id = (info.st_dev, info.st_ino)
            raw.seek(start)
            lines = _BoundedLines(raw, info.st_size - start, max_line_bytes, lines_before)
            import jsonlines  # here: the reports import this module and never read with it

            _parse(jsonlines.Reader(lines, loads=loads_line), lines, read, str(self.path))
            read.end_offset = start + lines.consumed
            read.last_lineno = lines.lineno
        if log_bad_lines:
            _log_bad_lines(read.bad_lines, self.path)
        return read

    def read_for_appending(self) -> ResultsRead:
        """Every valid line, as `read`; ResultsFileError when the file holds several lines
        and none of them is a results line (a CSV named results.jsonl, say): appending JSON
        lines to it would only mix two files. One bad line alone is what a machine crash
        during the first append leaves: it is skipped, as any bad line."""
        read = self.read(log_bad_lines=False)
        if len(read.bad_lines) > 1 and not read.lines:
            first = read.bad_lines[0]
            raise ResultsFileError(
                f"results file {str(self.path)!r} holds no readable results line: its "
                f"{len(read.bad_lines)} line(s) are not results lines (line {first.lineno}: "
                f"{first.reason}); give another --output-dirname or --output-basename, or "
                "move it away")
        _log_bad_lines(read.bad_lines, self.path)
        return read

    def backup(self) -> Optional[Path]:
        """Move the file aside (never delete it); return where it went."""
        with self.locked():
            if not self.path.exists():
                return None
            stamp = time.strftime("%Y%m%d-%H%M%S")
            backup = self.path.with_name(f"{self.path.name}.{stamp}.bak")
            counter = 1
            while backup.exists():
                backup = self.path.with_name(f"{self.path.name}.{stamp}-{counter}.bak")
                counter += 1
            shutil.move(str(self.path), str(backup))
        return backup


def append_line(path: Path, line: dict[str, Any]) -> None:
    """Append one line to the results file at `path` (see `ResultsFile.append`)."""
    ResultsFile(path).append(line)


def read_results(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> ResultsRead:
    """Every valid line of a results file (see `ResultsFile.read`)."""
    return ResultsFile(path).read(max_line_bytes=max_line_bytes)


def encode_line(line: dict[str, Any]) -> bytes:
    """A results line as the file holds it: strict JSON (strict_json.dumps: a NaN or an
    infinity raises NonFiniteNumber naming it), compact, UTF-8, one newline at its end."""
    return (strict_json.dumps(line) + "\n").encode("utf-8")


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[written:]


def _cut_back(fd: int, size: int, path: Path) -> None:
    """Undo a failed append: back to the file's previous end, its last whole line."""
    try:
        os.ftruncate(fd, size)
    except OSError as error:
        log.error("%s: could not remove a partly written line (%s); the next append "
                  "ends it first", path, error.strerror or error)


def _parse(reader: "jsonlines.Reader", lines: "_BoundedLines", read: ResultsRead, path: str) -> None:
    import jsonlines

    while True:
        try:
            value = reader.read()
        except EOFError:
            break
        except jsonlines.InvalidLineError as error:
            read.bad_lines.append(BadLine(path, lines.lineno, _short_reason(error)))
            continue
        except RecursionError:
            read.bad_lines.append(BadLine(path, lines.lineno, "nested too deeply"))
            continue
        if not isinstance(value, dict):
            read.bad_lines.append(BadLine(path, lines.lineno, "not a JSON object"))
            continue
        problem = shape_problem(value)
        if problem:
            read.bad_lines.append(BadLine(path, lines.lineno, problem))
            continue
        read.lines.append(value)
    skipped = [BadLine(path, lineno, reason) for lineno, reason in lines.skipped]
    if skipped:
        read.bad_lines = sorted(read.bad_lines + skipped, key=lambda bad: bad.lineno)


def loads_line(text: Union[str, bytes]) -> Any:
    """A line's JSON value; a key given twice in an object reads as its first value (the
    reports' reader, DuckDB's, does the same), at the cost of one comparison per object."""
    return json.loads(text, object_pairs_hook=_first_value_wins)


def _first_value_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    found = {}
    for key, value in pairs:
        found.setdefault(key, value)
    return found


def shape_problem(line: dict[str, Any]) -> Optional[str]:
    """Why a JSON object cannot be a results line (a part that must be an object is not, a
    version that is none, a timestamp no date can show), or None."""
    for part in OBJECT_PARTS:
        value = line.get(part)
        if value is not None and not isinstance(value, dict):
            return f"its {part!r} is {type(value).__name__}, not a JSON object"
    if "schema_version" in line and not is_schema_version(line["schema_version"]):
        shown = json.dumps(line["schema_version"])
        return (f"its schema_version is {shown[:40]}, not a version number (1 to "
                f"{MAX_SCHEMA_VERSION})")
    metrics = line.get("metrics")
    times = metrics.get("per_iter_time") if isinstance(metrics, dict) else None
    if isinstance(times, list) and any(isinstance(value, bool) for value in times):
        return "its metrics.per_iter_time holds true or false, not times"
    for key in TIMESTAMP_KEYS:
        if timestamp_out_of_range(line.get(key)):
            return f"its {key} {str(line[key])[:40]} is out of the range of dates (years 1 to 9999)"
    return None


def timestamp_out_of_range(value: Any) -> bool:
    """Whether `value` is a number (or a number written as text, which readers take) of
    seconds that no date can show; anything else (missing, text, infinite) reads as no time."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return False
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
    return math.isfinite(number) and not TIMESTAMP_RANGE[0] <= number <= TIMESTAMP_RANGE[1]


def is_schema_version(value: Any) -> bool:
    """Whether `value` can be a line's schema_version: a whole number from 1 on (a version
    newer than this one's is read; its identity is judged by core.config)."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and 1 <= value <= MAX_SCHEMA_VERSION)


def _log_bad_lines(bad_lines: list[BadLine], path: Path) -> None:
    for bad in bad_lines[:MAX_BAD_LINES_LOGGED]:
        log.warning("%s line %d skipped: %s", bad.path, bad.lineno, bad.reason)
    if len(bad_lines) > MAX_BAD_LINES_LOGGED:
        log.warning("%s: %d more unreadable lines skipped", path,
                    len(bad_lines) - MAX_BAD_LINES_LOGGED)


class _BoundedLines:
    """The non-blank lines of at most `budget` bytes of a file, each at most `max_line`
    bytes long; longer lines are skipped (listed in `skipped`) without being kept."""

    def __init__(self, raw: BinaryIO, budget: int, max_line: int, lineno: int = 0) -> None:
        self._raw = raw
        self._budget = max(budget, 0)
        self._max_line = max_line
        self.consumed = 0
        self.lineno = lineno
        self.skipped: list[tuple[int, str]] = []

    def __iter__(self) -> "_BoundedLines":
        return self

    def __next__(self) -> bytes:
        while True:
            line = self._readline(self._max_line + 1)
            if not line:
                raise StopIteration
            self.lineno += 1
            if len(line) > self._max_line:
                if not line.endswith(b"\n"):
                    self._skip_rest_of_line()
                self.skipped.append((self.lineno, f"longer than {self._max_line} bytes"))
                continue
            if line.strip():
                return line

    def _readline(self, limit: int) -> bytes:
        left = self._budget - self.consumed
        if left <= 0:
            return b""
        line = self._raw.readline(min(limit, left))
        self.consumed += len(line)
        return line

    def _skip_rest_of_line(self) -> None:
        while True:
            chunk = self._readline(_CHUNK_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return


def _short_reason(error: Exception) -> str:
    message = str(error).split(":", 1)[-1].strip()
    return re.sub(r"\s*\(line \d+\)$", "", message)[:200] or "invalid JSON"
