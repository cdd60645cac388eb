"""The reports' columnar engine: one DuckDB connection and the `lines` view over the files read.

`reports.read.cache` opens each file (what it keeps, and what `reports.read.engine` parses
of the rest); this module puts the files together: `lines` has one row per usable results
line of every file, with `fi` (the file's index), `ord` (the line's ordinal in its file),
`id` and the columns every line needs (`reports.read.sql.LINE_COLUMNS`, `DERIVED`). The
details of selected lines (`reports.read.sql.DETAIL_COLUMNS`) are gathered in the `details`
table by `ensure_details`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from reports.errors import ReportError, ScratchError
from reports.read import cache
from reports.read import engine as eng
from reports.read.engine import ID_STRIDE, FileScan, connect
from reports.read.sql import CHECK, DERIVED, DETAIL_COLUMNS, LINE_COLUMNS, USABLE

log = logging.getLogger(__name__)


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given; a folder stands for every *.jsonl file under it (sorted). A file
    named twice (or by two names) counts once."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise ReportError(f"folder {str(path)!r} holds no *.jsonl results file")
            files += found
        elif not path.exists():
            raise ReportError(f"results file {str(path)!r} does not exist")
        elif not path.is_file():
            # A device or a pipe may never end (report /dev/zero): regular files only.
            raise ReportError(f"results file {str(path)!r} is not a regular file")
        else:
            files += [path]
    unique: dict[str, Path] = {}
    for path in files:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


class Engine:
    """A DuckDB connection holding the `lines` view over every file given."""

    def __init__(self, cache_dir: Optional[Path] = None, threads: Optional[int] = None,
                 settings: bool = True) -> None:
        self._temp = Path(tempfile.mkdtemp(prefix="experiment-runner-reports-"))
        self.con = connect(self._temp, threads)
        self.cache_dir = cache_dir
        #: Whether files read without the cache have their lines' settings read (compare).
        self.settings = settings
        self.files: list[FileScan] = []
        self._detailed: Optional[set[int]] = None  # the ids in `details`, once made

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            shutil.rmtree(self._temp, ignore_errors=True)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, paths: Sequence[Path]) -> list[FileScan]:
        """Read files (and folders of them); returns their scans, in order."""
        added = []
        known = {os.path.realpath(scan.path): scan for scan in self.files}
        for path in expand_paths(paths):
            if os.path.realpath(path) in known:
                added.append(known[os.path.realpath(path)])
                continue
            index = len(self.files)
            try:
                scan = cache.open_file(self.con, self._temp, self.cache_dir, path, f"f{index}", self.settings)
            except OSError as error:
                raise ReportError(f"cannot read results file {str(path)!r}: {error.strerror or error}") from error
            if scan.bad_lines and scan.rows <= len(scan.bad_lines):  # rows count the bad ones
                first = scan.bad_lines[0]
                raise ReportError(
                    f"{path} holds no readable results line: its {len(scan.bad_lines)} "
                    f"line(s) are not results lines (line {first.lineno}: {first.reason}); "
                    "results files are JSON lines written by experiment-runner")
            self.files.append(scan)
            known[os.path.realpath(path)] = scan
            added.append(scan)
            for bad in scan.bad_lines[:20]:
                log.warning("%s line %d skipped: %s", bad.path, bad.lineno, bad.reason)
            if len(scan.bad_lines) > 20:
                log.warning("%s: %d more unreadable lines skipped", path, len(scan.bad_lines) - 20)
        self._define_view()
        return added

    def _define_view(self) -> None:
        columns = ", ".join(LINE_COLUMNS)
        parts = [
            f"SELECT {index} AS fi, ord, {index} * {ID_STRIDE} + ord AS id, {columns}, {DERIVED} "
            f"FROM {scan.relation}"
            for index, scan in enumerate(self.files)
        ]
        if not parts:
            raise ReportError("no results file given")
        self.con.execute("CREATE OR REPLACE TEMP VIEW lines AS " + " UNION ALL ".join(parts))

    def ensure_details(self, ids: Iterable[int]) -> None:
        """Make TEMP table `details` (`id` and `reports.read.engine.DETAIL_COLUMNS`) hold these lines.

        A file read with its details (cached) gives them from its rows; a file read without
        (`--no-cache`) has the wanted lines' text read again and parsed by the same SQL, and
        each line checked to be the one parsed first (the same experiment key).
        """
        wanted: dict[int, list[int]] = {}
        for identifier in set(int(i) for i in ids if i is not None) - (self._detailed or set()):
            wanted.setdefault(identifier // ID_STRIDE, []).append(identifier % ID_STRIDE)
        columns = ", ".join(DETAIL_COLUMNS)
        if self._detailed is None and not wanted:
            # Nothing to hold yet: empty, with the columns' types (the parse of no line).
            self._parse_lines([])
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE details AS SELECT 0::BIGINT AS id, {columns} "
                             f"FROM detail_lines")
            self._detailed = set()
        for index, ordinals in sorted(wanted.items()):
            scan = self.files[index]
            ordinals.sort()
            self.con.execute("CREATE OR REPLACE TEMP TABLE detail_ords AS SELECT unnest(range(len(o))) AS pos, "
                             "unnest(o) AS ord FROM (SELECT ?::BIGINT[] AS o)", [ordinals])
            if scan.details:
                # The range lets the scan skip the parts and row groups holding none of them.
                source = (f"SELECT {index} * {ID_STRIDE} + ord AS id, {columns} FROM {scan.relation} "
                          f"WHERE ord BETWEEN {ordinals[0]} AND {ordinals[-1]} "
                          f"AND ord IN (SELECT ord FROM detail_ords)")
            else:
                # The line parsed again must be the one parsed first: the same experiment key.
                located = eng.lines_at(scan.path, scan.index, ordinals) if scan.index is not None else {}
                self._parse_lines([located[o][1] for o in ordinals if o in located])
                source = (f"SELECT {index} * {ID_STRIDE} + w.ord AS id, {columns} "
                          f"FROM detail_lines d JOIN detail_ords w ON d.rowid = w.pos "
                          f"JOIN {scan.relation} r ON r.ord = w.ord WHERE d.kind IN ({USABLE}, {CHECK}) "
                          f"AND d.key = r.key")
            if self._detailed is None:
                added = self.con.execute(f"CREATE OR REPLACE TEMP TABLE details AS {source}").fetchone()[0]
                self._detailed = set()
            else:
                added = self.con.execute(f"INSERT INTO details {source}").fetchone()[0]
            if added != len(ordinals):
                raise ReportError(f"results file {str(scan.path)!r} changed while it was read: read it again")
            self._detailed.update(index * ID_STRIDE + o for o in ordinals)

    def _parse_lines(self, texts: list[bytes]) -> None:
        """TEMP table `detail_lines`: these lines parsed with every column, in order."""
        path = self._temp / "details.jsonl"
        try:
            path.write_bytes(b"".join(text + b"\n" for text in texts))
        except OSError as error:
            path.unlink(missing_ok=True)
            raise ScratchError(self._temp, error) from error
        eng.scan_into(self.con, path, "detail_lines")
