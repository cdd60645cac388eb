"""The reports' columnar engine: one DuckDB connection and the `lines` view over the files read.

`reports.engine` parses and normalises a file; `reports.cache` keeps what was parsed; this
module puts the files together: `lines` has one row per usable results line of every file,
with `fi` (the file's index), `ord` (the line's ordinal in its file), `id` and the
normalised columns (`reports.engine.NORMALISED`, `DERIVED`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

from reports import cache
from reports.engine import DERIVED, ID_STRIDE, FileScan, connect, expand_paths
from reports.errors import ReportError

log = logging.getLogger(__name__)


class Engine:
    """A DuckDB connection holding the `lines` view over every file given."""

    def __init__(self, cache_dir: Optional[Path] = None, threads: Optional[int] = None) -> None:
        self._temp = Path(tempfile.mkdtemp(prefix="experiment-runner-reports-"))
        self.con = connect(self._temp, threads)
        self.cache_dir = cache_dir
        self.files: list[FileScan] = []

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
                scan = cache.open_file(self.con, self._temp, self.cache_dir, path, f"f{index}")
            except OSError as error:
                raise ReportError(f"cannot read results file {str(path)!r}: {error.strerror or error}") from error
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
        parts = [
            f"SELECT {index} AS fi, ord, {index} * {ID_STRIDE} + ord AS id, * EXCLUDE (ord), {DERIVED} "
            f"FROM {scan.relation}"
            for index, scan in enumerate(self.files)
        ]
        if not parts:
            raise ReportError("no results file given")
        self.con.execute("CREATE OR REPLACE TEMP VIEW lines AS " + " UNION ALL ".join(parts))

    def tmp_path(self, name: str) -> Path:
        return self._temp / name
