"""After a sweep: the reports' cache of its results file brought up to date.

A report reads a results file through a cache of its parsed lines (reports/read/cache.py),
so that only what was appended since the last report is parsed. The runner refreshes that
cache once its sweep has appended its lines: the first report after a sweep then parses
nothing again, however many nights the file holds. Files under `REFRESH_MIN_BYTES` are left
alone, before anything of the reports is imported (a report parses them in a tenth of a
second), and without the reports' extra (DuckDB) nothing is done.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

#: The least size of a results file whose cache the runner refreshes (32 MiB).
REFRESH_MIN_BYTES = 32 * 2**20


def refresh_report_cache(results_path: Path, cache_dir: Optional[Path] = None) -> bool:
    """Parse what the sweep appended to `results_path` into the reports' cache (`cache_dir`,
    else the reports' own), if the file is `REFRESH_MIN_BYTES` or more; returns whether it
    was refreshed. Never fails the sweep (a cache that cannot be written is only a slower
    first report)."""
    try:
        if Path(results_path).stat().st_size < REFRESH_MIN_BYTES:
            return False
    except OSError:
        return False
    if importlib.util.find_spec("duckdb") is None:  # the runner without the reports' extra
        return False
    try:
        from reports.read.cache import refresh
    except ImportError:  # the runner without the reports
        return False
    started = time.perf_counter()
    try:
        refreshed = refresh(Path(results_path), cache_dir)
    except Exception as error:  # noqa: BLE001 - anything: the lines are written already
        log.warning("the reports' cache of %s was not refreshed (%s); the next report parses "
                    "what this sweep wrote", results_path, error)
        return False
    if refreshed:
        log.info("reports' cache of %s refreshed in %.2f s", results_path, time.perf_counter() - started)
    return refreshed
